//go:build ucx

// A thin layer over UCX's UCP API: libucp is loaded at run time with
// dlopen, so a binary built with -tags ucx still starts on hosts without
// UCX (and says so). Every call but spx_load takes the worker lock held by
// the Go side.
#ifndef SPINDLE_UCX_SHIM_H
#define SPINDLE_UCX_SHIM_H

#include <stddef.h>
#include <stdint.h>
#include <ucp/api/ucp.h>

// spx_ep is an endpoint and what its error handler saw.
typedef struct {
	ucp_ep_h ep;
	volatile int failed;     // set by the error handler
	volatile int status;     // the ucs_status_t it got
} spx_ep;

int spx_load(char *err, size_t errlen);
const char *spx_version(void);
const char *spx_status_string(int status);

int spx_init(ucp_context_h *ctx, ucp_worker_h *worker, int *efd);
void spx_cleanup(ucp_context_h ctx, ucp_worker_h worker);
int spx_address(ucp_worker_h worker, void **addr, size_t *len);
void spx_release_address(ucp_worker_h worker, void *addr);

int spx_ep_create(ucp_worker_h worker, const void *addr, spx_ep *ep);
void *spx_ep_close(ucp_worker_h worker, spx_ep *ep, int force);

// spx_send starts a tagged send of len bytes at buf. It returns NULL when
// the send completed at once, a request to poll, or NULL with *status set
// to an error.
void *spx_send(spx_ep *ep, const void *buf, size_t len, uint64_t tag, int *status);
// spx_probe looks for the message tagged tag and takes it off the
// unexpected queue; it returns NULL when none has arrived.
void *spx_probe(ucp_worker_h worker, uint64_t tag, size_t *len);
void *spx_msg_recv(ucp_worker_h worker, void *buf, size_t len, void *msg, int *status);

int spx_request_status(void *req);
void spx_request_cancel(ucp_worker_h worker, void *req);
void spx_request_free(void *req);

unsigned spx_progress(ucp_worker_h worker);
int spx_arm(ucp_worker_h worker);

#endif
