//go:build cgo && linux

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shim.h"

#if defined(__has_include)
#if __has_include(<ucp/api/ucp.h>)
#define SPX_HAVE_UCX 1
#endif
#endif

#ifdef SPX_HAVE_UCX

#include <dlfcn.h>
#include <ucp/api/ucp.h>

// The UCP entry points, resolved by spx_load.
#define SPX_UCP_SYMS(X) \
	X(ucp_config_read) X(ucp_config_release) X(ucp_config_modify) X(ucp_init_version) X(ucp_cleanup) \
	X(ucp_worker_create) X(ucp_worker_destroy) X(ucp_worker_get_address) \
	X(ucp_worker_release_address) X(ucp_worker_get_efd) X(ucp_worker_arm) \
	X(ucp_worker_progress) X(ucp_ep_create) X(ucp_ep_close_nbx) X(ucp_tag_send_nbx) \
	X(ucp_tag_probe_nb) X(ucp_tag_msg_recv_nbx) X(ucp_request_check_status) \
	X(ucp_request_cancel) X(ucp_request_free) X(ucp_get_version_string) X(ucp_ep_print_info) \
	X(ucp_context_print_info)

#define SPX_DECL(n) static __typeof__(n) *p_##n;
SPX_UCP_SYMS(SPX_DECL)
static __typeof__(ucs_status_string) *p_ucs_status_string;

static int loaded;

int spx_load(char *err, size_t errlen) {
	if (loaded) {
		return 0;
	}
	void *ucp = dlopen("libucp.so.0", RTLD_NOW | RTLD_GLOBAL);
	if (ucp == NULL) {
		snprintf(err, errlen, "cannot load libucp: %s", dlerror());
		return -1;
	}
	// libucp pulls in libucs, which holds ucs_status_string.
	void *ucs = dlopen("libucs.so.0", RTLD_NOW | RTLD_GLOBAL);
	if (ucs == NULL) {
		snprintf(err, errlen, "cannot load libucs: %s", dlerror());
		return -1;
	}
#define SPX_LOAD(n) \
	p_##n = (__typeof__(n) *)dlsym(ucp, #n); \
	if (p_##n == NULL) { snprintf(err, errlen, "libucp.so.0 lacks %s", #n); return -1; }
	SPX_UCP_SYMS(SPX_LOAD)
	p_ucs_status_string = (__typeof__(ucs_status_string) *)dlsym(ucs, "ucs_status_string");
	if (p_ucs_status_string == NULL) {
		snprintf(err, errlen, "libucs.so.0 lacks ucs_status_string");
		return -1;
	}
	loaded = 1;
	return 0;
}

const char *spx_version(void) { return p_ucp_get_version_string(); }

const char *spx_status_string(int status) { return p_ucs_status_string((ucs_status_t)status); }

int spx_init(void **ctxp, void **workerp, int *efd, const char *rndv_thresh) {
	ucp_config_t *config;
	ucs_status_t st = p_ucp_config_read(NULL, NULL, &config);
	if (st != UCS_OK) {
		return st;
	}
	if (rndv_thresh != NULL) {
		st = p_ucp_config_modify(config, "RNDV_THRESH", rndv_thresh);
		if (st != UCS_OK) {
			p_ucp_config_release(config);
			return st;
		}
	}
	ucp_params_t params;
	memset(&params, 0, sizeof(params));
	params.field_mask = UCP_PARAM_FIELD_FEATURES;
	params.features = UCP_FEATURE_TAG | UCP_FEATURE_WAKEUP;
	ucp_context_h ctx;
	st = p_ucp_init_version(UCP_API_MAJOR, UCP_API_MINOR, &params, config, &ctx);
	p_ucp_config_release(config);
	if (st != UCS_OK) {
		return st;
	}
	ucp_worker_params_t wp;
	memset(&wp, 0, sizeof(wp));
	wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE | UCP_WORKER_PARAM_FIELD_EVENTS;
	wp.thread_mode = UCS_THREAD_MODE_SERIALIZED;
	wp.events = UCP_WAKEUP_TAG_SEND | UCP_WAKEUP_TAG_RECV | UCP_WAKEUP_TX | UCP_WAKEUP_RX;
	ucp_worker_h worker;
	st = p_ucp_worker_create(ctx, &wp, &worker);
	if (st != UCS_OK) {
		p_ucp_cleanup(ctx);
		return st;
	}
	st = p_ucp_worker_get_efd(worker, efd);
	if (st != UCS_OK) {
		p_ucp_worker_destroy(worker);
		p_ucp_cleanup(ctx);
		return st;
	}
	*ctxp = ctx;
	*workerp = worker;
	return UCS_OK;
}

void spx_cleanup(void *ctx, void *worker) {
	p_ucp_worker_destroy((ucp_worker_h)worker);
	p_ucp_cleanup((ucp_context_h)ctx);
}

int spx_address(void *worker, void **addr, size_t *len) {
	ucp_address_t *a = NULL;
	ucs_status_t st = p_ucp_worker_get_address((ucp_worker_h)worker, &a, len);
	*addr = a;
	return st;
}

void spx_release_address(void *worker, void *addr) {
	p_ucp_worker_release_address((ucp_worker_h)worker, (ucp_address_t *)addr);
}

static void spx_ep_error(void *arg, ucp_ep_h ep, ucs_status_t status) {
	spx_ep *e = arg;
	(void)ep;
	e->status = status;
	e->failed = 1;
}

int spx_ep_create(void *worker, const void *addr, spx_ep *ep, int peer_errors) {
	ucp_ep_params_t p;
	memset(&p, 0, sizeof(p));
	p.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
		UCP_EP_PARAM_FIELD_ERR_HANDLER;
	p.address = (const ucp_address_t *)addr;
	p.err_mode = peer_errors ? UCP_ERR_HANDLING_MODE_PEER : UCP_ERR_HANDLING_MODE_NONE;
	p.err_handler.cb = spx_ep_error;
	p.err_handler.arg = ep;
	ucp_ep_h h;
	ucs_status_t st = p_ucp_ep_create((ucp_worker_h)worker, &p, &h);
	if (st == UCS_OK) {
		ep->ep = h;
		ep->peer_errors = peer_errors;
	}
	return st;
}

void *spx_ep_close(spx_ep *ep, int force) {
	ucp_request_param_t p;
	memset(&p, 0, sizeof(p));
	p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
	p.flags = force ? UCP_EP_CLOSE_FLAG_FORCE : 0;
	void *r = p_ucp_ep_close_nbx((ucp_ep_h)ep->ep, &p);
	if (UCS_PTR_IS_ERR(r)) {
		return NULL;
	}
	return r;
}

// print_info copies what UCX prints of an endpoint (ep) or, when ep is
// NULL, of a context into buf.
static int print_info(spx_ep *ep, void *ctx, char *buf, size_t len) {
	char *text = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&text, &n);
	if (f == NULL) {
		return -1;
	}
	if (ep != NULL) {
		p_ucp_ep_print_info((ucp_ep_h)ep->ep, f);
	} else {
		p_ucp_context_print_info((ucp_context_h)ctx, f);
	}
	fclose(f);
	snprintf(buf, len, "%s", text != NULL ? text : "");
	free(text);
	return 0;
}

int spx_ep_info(spx_ep *ep, char *buf, size_t len) { return print_info(ep, NULL, buf, len); }

int spx_context_info(void *ctx, char *buf, size_t len) { return print_info(NULL, ctx, buf, len); }

void *spx_send(spx_ep *ep, const void *buf, size_t len, uint64_t tag, int *status) {
	ucp_request_param_t p;
	memset(&p, 0, sizeof(p));
	p.op_attr_mask = UCP_OP_ATTR_FIELD_MEMORY_TYPE;
	p.memory_type = UCS_MEMORY_TYPE_HOST;
	void *r = p_ucp_tag_send_nbx((ucp_ep_h)ep->ep, buf, len, tag, &p);
	*status = UCS_OK;
	if (UCS_PTR_IS_ERR(r)) {
		*status = UCS_PTR_STATUS(r);
		return NULL;
	}
	return r;
}

void *spx_probe(void *worker, uint64_t tag, size_t *len) {
	ucp_tag_recv_info_t info;
	ucp_tag_message_h m = p_ucp_tag_probe_nb((ucp_worker_h)worker, tag, (ucp_tag_t)-1, 1, &info);
	if (m != NULL) {
		*len = info.length;
	}
	return m;
}

void *spx_msg_recv(void *worker, void *buf, size_t len, void *msg, int *status) {
	ucp_request_param_t p;
	memset(&p, 0, sizeof(p));
	p.op_attr_mask = UCP_OP_ATTR_FIELD_MEMORY_TYPE;
	p.memory_type = UCS_MEMORY_TYPE_HOST;
	void *r = p_ucp_tag_msg_recv_nbx((ucp_worker_h)worker, buf, len, (ucp_tag_message_h)msg, &p);
	*status = UCS_OK;
	if (UCS_PTR_IS_ERR(r)) {
		*status = UCS_PTR_STATUS(r);
		return NULL;
	}
	return r;
}

// spx_iov must have ucp_dt_iov_t's layout: arrays of it go to UCX as is.
_Static_assert(sizeof(spx_iov) == sizeof(ucp_dt_iov_t), "spx_iov is not ucp_dt_iov_t");
_Static_assert(offsetof(spx_iov, len) == offsetof(ucp_dt_iov_t, length), "spx_iov is not ucp_dt_iov_t");

void *spx_send_iov(spx_ep *ep, const spx_iov *iov, size_t n, uint64_t tag, int *status) {
	ucp_request_param_t p;
	memset(&p, 0, sizeof(p));
	p.op_attr_mask = UCP_OP_ATTR_FIELD_MEMORY_TYPE | UCP_OP_ATTR_FIELD_DATATYPE;
	p.memory_type = UCS_MEMORY_TYPE_HOST;
	p.datatype = ucp_dt_make_iov();
	void *r = p_ucp_tag_send_nbx((ucp_ep_h)ep->ep, iov, n, tag, &p);
	*status = UCS_OK;
	if (UCS_PTR_IS_ERR(r)) {
		*status = UCS_PTR_STATUS(r);
		return NULL;
	}
	return r;
}

void *spx_probe_mask(void *worker, uint64_t tag, uint64_t mask, size_t *len, uint64_t *full) {
	ucp_tag_recv_info_t info;
	ucp_tag_message_h m = p_ucp_tag_probe_nb((ucp_worker_h)worker, tag, mask, 1, &info);
	if (m != NULL) {
		*len = info.length;
		*full = info.sender_tag;
	}
	return m;
}

void *spx_msg_recv_iov(void *worker, const spx_iov *iov, size_t n, void *msg, int *status) {
	ucp_request_param_t p;
	memset(&p, 0, sizeof(p));
	p.op_attr_mask = UCP_OP_ATTR_FIELD_MEMORY_TYPE | UCP_OP_ATTR_FIELD_DATATYPE;
	p.memory_type = UCS_MEMORY_TYPE_HOST;
	p.datatype = ucp_dt_make_iov();
	void *r = p_ucp_tag_msg_recv_nbx((ucp_worker_h)worker, (void *)iov, n, (ucp_tag_message_h)msg, &p);
	*status = UCS_OK;
	if (UCS_PTR_IS_ERR(r)) {
		*status = UCS_PTR_STATUS(r);
		return NULL;
	}
	return r;
}

int spx_request_status(void *req) { return p_ucp_request_check_status(req); }

void spx_request_cancel(void *worker, void *req) { p_ucp_request_cancel((ucp_worker_h)worker, req); }

void spx_request_free(void *req) { p_ucp_request_free(req); }

unsigned spx_progress(void *worker) { return p_ucp_worker_progress((ucp_worker_h)worker); }

int spx_arm(void *worker) { return p_ucp_worker_arm((ucp_worker_h)worker); }

#else // no UCX headers at build time: UCX is never available

int spx_load(char *err, size_t errlen) {
	snprintf(err, errlen, "built without UCX's headers (install libucx-dev and rebuild)");
	return -1;
}

// Nothing below runs: spx_load failed.
const char *spx_version(void) { return ""; }
const char *spx_status_string(int status) { (void)status; return "UCX not built in"; }
int spx_init(void **ctx, void **worker, int *efd, const char *rndv_thresh) {
	(void)ctx; (void)worker; (void)efd; (void)rndv_thresh; return -1;
}
void spx_cleanup(void *ctx, void *worker) { (void)ctx; (void)worker; }
int spx_address(void *worker, void **addr, size_t *len) { (void)worker; (void)addr; (void)len; return -1; }
void spx_release_address(void *worker, void *addr) { (void)worker; (void)addr; }
int spx_ep_create(void *worker, const void *addr, spx_ep *ep, int peer_errors) {
	(void)worker; (void)addr; (void)ep; (void)peer_errors; return -1;
}
void *spx_ep_close(spx_ep *ep, int force) { (void)ep; (void)force; return NULL; }
int spx_ep_info(spx_ep *ep, char *buf, size_t len) { (void)ep; (void)buf; (void)len; return -1; }
int spx_context_info(void *ctx, char *buf, size_t len) { (void)ctx; (void)buf; (void)len; return -1; }
void *spx_send(spx_ep *ep, const void *buf, size_t len, uint64_t tag, int *status) {
	(void)ep; (void)buf; (void)len; (void)tag; *status = -1; return NULL;
}
void *spx_probe(void *worker, uint64_t tag, size_t *len) { (void)worker; (void)tag; (void)len; return NULL; }
void *spx_msg_recv(void *worker, void *buf, size_t len, void *msg, int *status) {
	(void)worker; (void)buf; (void)len; (void)msg; *status = -1; return NULL;
}
void *spx_send_iov(spx_ep *ep, const spx_iov *iov, size_t n, uint64_t tag, int *status) {
	(void)ep; (void)iov; (void)n; (void)tag; *status = -1; return NULL;
}
void *spx_probe_mask(void *worker, uint64_t tag, uint64_t mask, size_t *len, uint64_t *full) {
	(void)worker; (void)tag; (void)mask; (void)len; (void)full; return NULL;
}
void *spx_msg_recv_iov(void *worker, const spx_iov *iov, size_t n, void *msg, int *status) {
	(void)worker; (void)iov; (void)n; (void)msg; *status = -1; return NULL;
}
int spx_request_status(void *req) { (void)req; return -1; }
void spx_request_cancel(void *worker, void *req) { (void)worker; (void)req; }
void spx_request_free(void *req) { (void)req; }
unsigned spx_progress(void *worker) { (void)worker; return 0; }
int spx_arm(void *worker) { (void)worker; return -1; }

#endif
