//go:build cgo && linux

// A thin layer over UCX's UCP API. libucp is loaded at run time with
// dlopen, so a binary with this layer still starts on hosts without UCX
// (and says so). Its types hide UCX's: the Go side compiles, and the
// layer builds as a stub that reports UCX unavailable, when UCX's headers
// are not installed. Every call but spx_load holds the Go side's worker
// lock.
#ifndef SPINDLE_UCX_SHIM_H
#define SPINDLE_UCX_SHIM_H

#include <stddef.h>
#include <stdint.h>

// spx_ep is an endpoint and what its error handler saw. It lives in C
// memory: UCX keeps a pointer to it for the handler.
typedef struct {
	void *ep;            // ucp_ep_h
	volatile int failed; // set by the error handler
	volatile int status; // the ucs_status_t it got
	int peer_errors;     // created with UCX's peer failure reports
} spx_ep;

// spx_load resolves libucp's entry points; on failure it returns -1 and
// writes why into err.
int spx_load(char *err, size_t errlen);
const char *spx_version(void);
const char *spx_status_string(int status);

// spx_init starts a UCP context and worker; rndv_thresh, when not NULL,
// overrides UCX's rendezvous threshold (RNDV_THRESH).
int spx_init(void **ctx, void **worker, int *efd, const char *rndv_thresh);
void spx_cleanup(void *ctx, void *worker);
int spx_address(void *worker, void **addr, size_t *len);
void spx_release_address(void *worker, void *addr);

// spx_ep_create connects ep to the worker at addr. With peer_errors, UCX
// reports a failed peer to ep's handler, which only some transports
// support (not shared memory).
int spx_ep_create(void *worker, const void *addr, spx_ep *ep, int peer_errors);
// spx_ep_close starts closing ep; it returns a request to poll, or NULL
// when the close completed (or failed) at once.
void *spx_ep_close(spx_ep *ep, int force);
// spx_ep_info writes into buf (truncated to len) what UCX says of ep's
// configuration (ucp_ep_print_info): among it, the transport of each of
// its lanes.
int spx_ep_info(spx_ep *ep, char *buf, size_t len);
// spx_context_info writes UCX's account of the context (its transport
// resources, ucp_context_print_info) into buf.
int spx_context_info(void *ctx, char *buf, size_t len);

// spx_send starts a tagged send of len bytes at buf. It returns NULL when
// the send completed at once, a request to poll, or NULL with *status set
// to an error.
void *spx_send(spx_ep *ep, const void *buf, size_t len, uint64_t tag, int *status);
// spx_probe looks for the message tagged tag and takes it off the
// unexpected queue; it returns NULL when none has arrived.
void *spx_probe(void *worker, uint64_t tag, size_t *len);
// spx_msg_recv receives a probed message into buf, like spx_send.
void *spx_msg_recv(void *worker, void *buf, size_t len, void *msg, int *status);

// spx_iov is one piece of a message sent or received in place, from or
// into several buffers (UCX's IOV datatype); an array of them must stay
// put until the request completes.
typedef struct {
	void *buf;
	size_t len;
} spx_iov;

// spx_send_iov is spx_send of the pieces of iov, in order, as one message.
void *spx_send_iov(spx_ep *ep, const spx_iov *iov, size_t n, uint64_t tag, int *status);
// spx_probe_mask is spx_probe of the first message whose tag matches tag
// on the bits of mask; *full gets its whole tag.
void *spx_probe_mask(void *worker, uint64_t tag, uint64_t mask, size_t *len, uint64_t *full);
// spx_msg_recv_iov is spx_msg_recv into the pieces of iov, in order.
void *spx_msg_recv_iov(void *worker, const spx_iov *iov, size_t n, void *msg, int *status);

int spx_request_status(void *req);
void spx_request_cancel(void *worker, void *req);
void spx_request_free(void *req);

unsigned spx_progress(void *worker);
int spx_arm(void *worker);

#endif
