// C side of harness/verbs: libibverbs is dlopen'ed and called through
// function pointers, so the test binary starts (and reports a clear absence)
// on hosts without rdma-core. Static inline verbs (post_send, post_recv,
// poll_cq) go through ctx->ops and need no symbol.
#ifndef GDR_VERBS_SHIM_H
#define GDR_VERBS_SHIM_H

#include <stdint.h>
#include <stddef.h>
#include <infiniband/verbs.h>

// gdr_load opens lib (e.g. "libibverbs.so.1"); returns NULL or an error text.
const char *gdr_load(const char *lib);
int gdr_has_dmabuf(void);
int gdr_has_iova2(void);

struct ibv_device **gdr_get_device_list(int *n, int *err);
void gdr_free_device_list(struct ibv_device **l);
struct ibv_device *gdr_dev_at(struct ibv_device **l, int i);
const char *gdr_dev_name(struct ibv_device *d);
const char *gdr_dev_node(struct ibv_device *d); // uverbsN, under /dev/infiniband
uint64_t gdr_dev_guid(struct ibv_device *d);
struct ibv_context *gdr_open(struct ibv_device *d, int *err);
int gdr_close(struct ibv_context *c);
int gdr_query_device(struct ibv_context *c, struct ibv_device_attr *a);
int gdr_query_port(struct ibv_context *c, uint8_t port, struct ibv_port_attr *a);
// gdr_port_flags is a->flags (IBV_QPF_*), or -1 where the headers predate
// the field (rdma-core < 20 calls it reserved); gdr_qpf_grh_required is the
// headers' IBV_QPF_GRH_REQUIRED (0 without it).
int gdr_port_flags(const struct ibv_port_attr *a);
int gdr_qpf_grh_required(void);
// gdr_fake_port_attr fills a as an ACTIVE port of link_layer with flags
// (where the headers have the field): for tests.
void gdr_fake_port_attr(struct ibv_port_attr *a, int link_layer, int flags);
int gdr_query_gid(struct ibv_context *c, uint8_t port, int idx, uint8_t out[16]);
struct ibv_pd *gdr_alloc_pd(struct ibv_context *c, int *err);
int gdr_dealloc_pd(struct ibv_pd *pd);
int gdr_reg_mr_uses_iova2(int access);
struct ibv_mr *gdr_reg_mr(struct ibv_pd *pd, uintptr_t addr, size_t len, int access, int *err);
struct ibv_mr *gdr_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t off, size_t len, uint64_t iova, int fd, int access, int *err);
int gdr_dereg_mr(struct ibv_mr *mr);
uint32_t gdr_mr_lkey(struct ibv_mr *mr);
uint32_t gdr_mr_rkey(struct ibv_mr *mr);
struct ibv_cq *gdr_create_cq(struct ibv_context *c, int cqe, int *err);
int gdr_destroy_cq(struct ibv_cq *cq);
// What gdr_mlx5_probe says about a device: libmlx5 is not loaded in this
// process (so no device of it is mlx5), it says the device is not mlx5, it
// is mlx5 with mlx5dv_create_qp, mlx5 without it, or it cannot tell (libmlx5
// predates mlx5dv_is_supported, rdma-core < 22, or no libmlx5.so.1 is loaded
// and the device's name starts with mlx5): taken as mlx5 without mlx5dv.
enum { GDR_MLX5_ABSENT, GDR_MLX5_NOT, GDR_MLX5_DV, GDR_MLX5_NODV, GDR_MLX5_UNKNOWN };
int gdr_mlx5_probe(struct ibv_context *c);
// 1 when MLX5_SCATTER_TO_CQE is "0" in the C environment libmlx5 reads.
int gdr_scatter_env_off(void);
// Test helpers: the probe on a stand-in device of that name; whether
// libmlx5.so.1 is loaded; load it.
int gdr_probe_standin(const char *name);
int gdr_mlx5_loaded(void);
int gdr_load_mlx5(void);
int gdr_mlx5_has_dv(void); // the probe found mlx5dv_create_qp
// 0 when a QP with receives in device memory (recv_devmem) may be created on
// a device of probe's kind, through mlx5dv (dv) or not; else EPERM.
int gdr_scatter_guard(int recv_devmem, int probe, int dv);
// Requester-side scatter-to-CQE (RDMA READ responses of <= 32 bytes copied by
// the CPU in ibv_poll_cq) is on only with sq_sig_all (Linux mlx5
// configure_requester_scat_cqe); every QP here signals selectively.
#define GDR_SQ_SIG_ALL 0
int gdr_sq_sig_all(void);
// dv: through mlx5dv_create_qp with MLX5DV_QP_CREATE_DISABLE_SCATTER_TO_CQE.
struct ibv_qp *gdr_create_rc_qp(struct ibv_pd *pd, struct ibv_cq *scq, struct ibv_cq *rcq,
	uint32_t max_send_wr, uint32_t max_recv_wr, uint32_t max_inline, int recv_devmem, int dv,
	uint32_t *got_inline, int *err);
int gdr_destroy_qp(struct ibv_qp *qp);
uint32_t gdr_qp_num(struct ibv_qp *qp);
int gdr_qp_init(struct ibv_qp *qp, uint8_t port, int access);
int gdr_qp_rtr(struct ibv_qp *qp, uint8_t port, int mtu_enum, uint32_t dest_qpn, uint32_t rq_psn,
	uint16_t dlid, int global, const uint8_t dgid[16], uint8_t sgid_index, uint8_t max_dest_rd_atomic,
	uint8_t sl, uint8_t tclass);
int gdr_qp_rts(struct ibv_qp *qp, uint32_t sq_psn, uint8_t max_rd_atomic, uint8_t timeout, uint8_t retry);
int gdr_qp_to_err(struct ibv_qp *qp);
const char *gdr_wc_status_str(int status);

// A flat, pointer-free work request Go can pass as a slice.
typedef struct {
	uint64_t wr_id;
	uint64_t laddr;
	uint64_t raddr;
	uint32_t len;
	uint32_t lkey;
	uint32_t rkey;
	uint32_t imm; // host order
	int32_t opcode;
	int32_t flags;
} gdr_wr;

// chained lists of n work requests; *bad = index of the first rejected one
int gdr_post_send(struct ibv_qp *qp, const gdr_wr *w, int n, int *bad);
int gdr_post_recv(struct ibv_qp *qp, const gdr_wr *w, int n, int *bad);

typedef struct {
	uint64_t wr_id;
	uint32_t status;
	uint32_t opcode;
	uint32_t byte_len;
	uint32_t imm; // host order
	uint32_t vendor_err;
	uint32_t wc_flags;
	uint32_t qp_num;
	uint32_t pad;
} gdr_wc;

// gdr_poll polls cq until it holds at least min (<= max) completions or
// timeout_ns passes; returns the count, or -errno on a poll error.
int gdr_poll(struct ibv_cq *cq, gdr_wc *out, int max, int min, int64_t timeout_ns);

// Latency ping-pong like ib_write_lat: each side writes size bytes to the
// peer and waits for the peer's write (its buffer's last byte changes to the
// iteration's tag, or, with use_imm, a RECV_RDMA_WITH_IMM completion).
// stamps[i] gets the monotonic time in ns of post i. Returns 0, or an errno
// (ETIMEDOUT when a wait passes timeout_ns); *wc_status holds a failed
// completion's status (or -1).
typedef struct {
	struct ibv_qp *qp;
	struct ibv_cq *scq;
	struct ibv_cq *rcq;
	uint64_t laddr;     // what we send: [laddr, laddr+size), tag in its last byte
	uint32_t lkey;
	uint64_t poll_addr; // the byte the peer's write sets to our wait tag
	uint64_t raddr;
	uint32_t rkey;
	uint32_t size;
	int32_t iters;
	int32_t first;    // 1: this side posts first (client)
	int32_t use_imm;  // 1: wait on recv completions instead of memory
	int32_t preposted; // use_imm: receives the caller posted before its barrier (0..2)
	int32_t inline_ok;
	int32_t sq_depth;
	int64_t timeout_ns;
} gdr_lat_args;
int gdr_lat(const gdr_lat_args *a, int64_t *stamps, int *wc_status, int *done);

// Bandwidth like ib_write_bw: iters WRs of size bytes with opcode, at most
// tx_depth outstanding, every cq_mod-th signaled. *start_ns is the first
// timed post, *end_ns the last completion (CLOCK_MONOTONIC, as gdr_now_ns),
// so runs of several threads can be put on one clock.
typedef struct {
	struct ibv_qp *qp;
	struct ibv_cq *scq;
	int32_t opcode;
	uint64_t laddr;
	uint32_t lkey;
	uint64_t raddr;
	uint32_t rkey;
	uint32_t size;
	int32_t iters;
	int32_t tx_depth;
	int32_t cq_mod;
	int32_t warmup;   // untimed WRs first
	int64_t timeout_ns;
	// A wait for a completion yields the CPU once it is longer than this
	// (0: YIELD_AFTER_NS).
	int64_t yield_after_ns;
	// gate, when set, is a start gate of gate_n threads (C memory): after
	// its warm-up each loop arrives and waits for all before the timed run
	// (perftest -q starts every QP together).
	int32_t *gate;
	int32_t gate_n;
} gdr_bw_args;
int gdr_bw(const gdr_bw_args *a, int64_t *start_ns, int64_t *end_ns, int *wc_status, int *done);

// gdr_gate_wait arrives at gate and waits until n threads have; 0, or ETIME
// when they have not within timeout_ns.
int gdr_gate_wait(int32_t *gate, int32_t n, int64_t timeout_ns);
int32_t gdr_gate_count(int32_t *gate);

// gdr_wait_u8 waits until *(uint8_t*)addr == want.
int gdr_wait_u8(uintptr_t addr, uint8_t want, int64_t timeout_ns);

int64_t gdr_now_ns(void);

#endif
