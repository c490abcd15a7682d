//go:build rdma

#include "shim.h"

#include <dlfcn.h>
#include <errno.h>
#include <infiniband/mlx5dv.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static struct {
	void *h;
	struct ibv_device **(*get_device_list)(int *);
	void (*free_device_list)(struct ibv_device **);
	const char *(*get_device_name)(struct ibv_device *);
	__be64 (*get_device_guid)(struct ibv_device *);
	struct ibv_context *(*open_device)(struct ibv_device *);
	int (*close_device)(struct ibv_context *);
	int (*query_device)(struct ibv_context *, struct ibv_device_attr *);
	int (*query_port)(struct ibv_context *, uint8_t, struct _compat_ibv_port_attr *);
	int (*query_gid)(struct ibv_context *, uint8_t, int, union ibv_gid *);
	struct ibv_pd *(*alloc_pd)(struct ibv_context *);
	int (*dealloc_pd)(struct ibv_pd *);
	struct ibv_mr *(*reg_mr)(struct ibv_pd *, void *, size_t, int);
	struct ibv_mr *(*reg_mr_iova2)(struct ibv_pd *, void *, size_t, uint64_t, unsigned int);
	struct ibv_mr *(*reg_dmabuf_mr)(struct ibv_pd *, uint64_t, size_t, uint64_t, int, int);
	int (*dereg_mr)(struct ibv_mr *);
	struct ibv_cq *(*create_cq)(struct ibv_context *, int, void *, struct ibv_comp_channel *, int);
	int (*destroy_cq)(struct ibv_cq *);
	struct ibv_qp *(*create_qp)(struct ibv_pd *, struct ibv_qp_init_attr *);
	int (*destroy_qp)(struct ibv_qp *);
	int (*modify_qp)(struct ibv_qp *, struct ibv_qp_attr *, int);
	const char *(*wc_status_str)(enum ibv_wc_status);
} G;

static char load_err[512];

#define SYM(field, name)                                                        \
	do {                                                                    \
		*(void **)(&G.field) = dlsym(h, name);                          \
		if (!G.field) {                                                 \
			snprintf(load_err, sizeof load_err, "%s has no symbol %s", lib, name); \
			return load_err;                                        \
		}                                                               \
	} while (0)

const char *gdr_load(const char *lib) {
	void *h = dlopen(lib, RTLD_NOW | RTLD_GLOBAL);
	if (!h) {
		const char *e = dlerror();
		snprintf(load_err, sizeof load_err, "%s", e ? e : "dlopen failed");
		return load_err;
	}
	SYM(get_device_list, "ibv_get_device_list");
	SYM(free_device_list, "ibv_free_device_list");
	SYM(get_device_name, "ibv_get_device_name");
	SYM(get_device_guid, "ibv_get_device_guid");
	SYM(open_device, "ibv_open_device");
	SYM(close_device, "ibv_close_device");
	SYM(query_device, "ibv_query_device");
	SYM(query_port, "ibv_query_port");
	SYM(query_gid, "ibv_query_gid");
	SYM(alloc_pd, "ibv_alloc_pd");
	SYM(dealloc_pd, "ibv_dealloc_pd");
	SYM(reg_mr, "ibv_reg_mr");
	SYM(dereg_mr, "ibv_dereg_mr");
	SYM(create_cq, "ibv_create_cq");
	SYM(destroy_cq, "ibv_destroy_cq");
	SYM(create_qp, "ibv_create_qp");
	SYM(destroy_qp, "ibv_destroy_qp");
	SYM(modify_qp, "ibv_modify_qp");
	SYM(wc_status_str, "ibv_wc_status_str");
	// Optional: older libibverbs lack these.
	*(void **)(&G.reg_mr_iova2) = dlsym(h, "ibv_reg_mr_iova2");
	*(void **)(&G.reg_dmabuf_mr) = dlsym(h, "ibv_reg_dmabuf_mr");
	G.h = h;
	return NULL;
}

int gdr_has_dmabuf(void) { return G.reg_dmabuf_mr != NULL; }
int gdr_has_iova2(void) { return G.reg_mr_iova2 != NULL; }

struct ibv_device **gdr_get_device_list(int *n, int *err) {
	errno = 0;
	struct ibv_device **l = G.get_device_list(n);
	*err = errno;
	return l;
}
void gdr_free_device_list(struct ibv_device **l) { G.free_device_list(l); }
struct ibv_device *gdr_dev_at(struct ibv_device **l, int i) { return l[i]; }
const char *gdr_dev_name(struct ibv_device *d) { return G.get_device_name(d); }
const char *gdr_dev_node(struct ibv_device *d) { return d->dev_name; }
uint64_t gdr_dev_guid(struct ibv_device *d) { return be64toh(G.get_device_guid(d)); }

struct ibv_context *gdr_open(struct ibv_device *d, int *err) {
	errno = 0;
	struct ibv_context *c = G.open_device(d);
	*err = c ? 0 : (errno ? errno : EIO);
	return c;
}
int gdr_close(struct ibv_context *c) { return G.close_device(c) ? (errno ? errno : EIO) : 0; }

static int rc_errno(int rc) { return rc == 0 ? 0 : (rc > 0 ? rc : (errno ? errno : EIO)); }

int gdr_query_device(struct ibv_context *c, struct ibv_device_attr *a) {
	errno = 0;
	return rc_errno(G.query_device(c, a));
}

// Same as the header's inline ibv_query_port: the provider's extended query
// when present, else the exported compat symbol.
int gdr_query_port(struct ibv_context *c, uint8_t port, struct ibv_port_attr *a) {
	struct verbs_context *vctx = verbs_get_ctx_op(c, query_port);
	errno = 0;
	if (!vctx) {
		memset(a, 0, sizeof(*a));
		return rc_errno(G.query_port(c, port, (struct _compat_ibv_port_attr *)a));
	}
	return rc_errno(vctx->query_port(c, port, a, sizeof(*a)));
}

// rdma-core 20 renamed ibv_port_attr's reserved byte to flags and defined
// IBV_QPF_GRH_REQUIRED with it (commit "verbs: Expose IBV_QPF_GRH_REQUIRED
// port flag"); a library older than its headers leaves the byte as the
// caller zeroed it (Go zeroes the struct), which reads as no flag.
#ifdef IBV_QPF_GRH_REQUIRED
int gdr_port_flags(const struct ibv_port_attr *a) { return a->flags; }
int gdr_qpf_grh_required(void) { return IBV_QPF_GRH_REQUIRED; }
#else
int gdr_port_flags(const struct ibv_port_attr *a) { (void)a; return -1; }
int gdr_qpf_grh_required(void) { return 0; }
#endif

void gdr_fake_port_attr(struct ibv_port_attr *a, int link_layer, int flags) {
	memset(a, 0, sizeof(*a));
	a->state = IBV_PORT_ACTIVE;
	a->active_mtu = IBV_MTU_4096;
	a->max_mtu = IBV_MTU_4096;
	a->lid = 7;
	a->link_layer = (uint8_t)link_layer;
#ifdef IBV_QPF_GRH_REQUIRED
	a->flags = (uint8_t)flags;
#else
	(void)flags;
#endif
}

int gdr_query_gid(struct ibv_context *c, uint8_t port, int idx, uint8_t out[16]) {
	union ibv_gid g;
	errno = 0;
	int rc = rc_errno(G.query_gid(c, port, idx, &g));
	if (rc == 0)
		memcpy(out, g.raw, 16);
	return rc;
}

struct ibv_pd *gdr_alloc_pd(struct ibv_context *c, int *err) {
	errno = 0;
	struct ibv_pd *pd = G.alloc_pd(c);
	*err = pd ? 0 : (errno ? errno : ENOMEM);
	return pd;
}
int gdr_dealloc_pd(struct ibv_pd *pd) { errno = 0; return rc_errno(G.dealloc_pd(pd)); }

// Flags from IBV_ACCESS_OPTIONAL_FIRST up (relaxed ordering) need the iova2
// entry point, exactly as the header's ibv_reg_mr macro decides; without it
// they are stripped.
int gdr_reg_mr_uses_iova2(int access) { return (access & IBV_ACCESS_OPTIONAL_RANGE) && G.reg_mr_iova2; }

struct ibv_mr *gdr_reg_mr(struct ibv_pd *pd, uintptr_t addr, size_t len, int access, int *err) {
	errno = 0;
	struct ibv_mr *mr;
	if (gdr_reg_mr_uses_iova2(access))
		mr = G.reg_mr_iova2(pd, (void *)addr, len, (uint64_t)addr, (unsigned)access);
	else
		mr = G.reg_mr(pd, (void *)addr, len, access & ~IBV_ACCESS_OPTIONAL_RANGE);
	*err = mr ? 0 : (errno ? errno : EINVAL);
	return mr;
}

struct ibv_mr *gdr_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t off, size_t len, uint64_t iova, int fd, int access, int *err) {
	if (!G.reg_dmabuf_mr) {
		*err = ENOSYS;
		return NULL;
	}
	errno = 0;
	struct ibv_mr *mr = G.reg_dmabuf_mr(pd, off, len, iova, fd, access);
	*err = mr ? 0 : (errno ? errno : EINVAL);
	return mr;
}
int gdr_dereg_mr(struct ibv_mr *mr) { errno = 0; return rc_errno(G.dereg_mr(mr)); }
uint32_t gdr_mr_lkey(struct ibv_mr *mr) { return mr->lkey; }
uint32_t gdr_mr_rkey(struct ibv_mr *mr) { return mr->rkey; }

struct ibv_cq *gdr_create_cq(struct ibv_context *c, int cqe, int *err) {
	errno = 0;
	struct ibv_cq *cq = G.create_cq(c, cqe, NULL, NULL, 0);
	*err = cq ? 0 : (errno ? errno : ENOMEM);
	return cq;
}
int gdr_destroy_cq(struct ibv_cq *cq) { errno = 0; return rc_errno(G.destroy_cq(cq)); }

// libmlx5's direct verbs, found in the libmlx5.so.1 that libibverbs already
// loaded for an mlx5 device (RTLD_NOLOAD: nothing new is loaded, so rxe in
// the lab and hosts without libmlx5 see no change). Called under the Go
// side's QP-creation lock.
static struct {
	void *h;
	bool (*is_supported)(struct ibv_device *);
	struct ibv_qp *(*create_qp)(struct ibv_context *, struct ibv_qp_init_attr_ex *, struct mlx5dv_qp_init_attr *);
} M;

int gdr_mlx5_probe(struct ibv_context *c) {
	if (!M.h) {
		M.h = dlopen("libmlx5.so.1", RTLD_NOW | RTLD_NOLOAD);
		// A provider built into libibverbs (static rdma-core builds)
		// leaves no libmlx5.so.1 to find: an mlx5-named device is then
		// taken as mlx5 without mlx5dv (the environment variable is
		// harmless to other providers).
		if (!M.h)
			return strncmp(c->device->name, "mlx5", 4) ? GDR_MLX5_ABSENT : GDR_MLX5_UNKNOWN;
		*(void **)(&M.is_supported) = dlsym(M.h, "mlx5dv_is_supported");
		*(void **)(&M.create_qp) = dlsym(M.h, "mlx5dv_create_qp");
	}
	if (!M.is_supported) // rdma-core < 22: cannot tell, assume mlx5
		return GDR_MLX5_UNKNOWN;
	if (!M.is_supported(c->device))
		return GDR_MLX5_NOT;
	return M.create_qp ? GDR_MLX5_DV : GDR_MLX5_NODV;
}

int gdr_scatter_env_off(void) {
	const char *v = getenv("MLX5_SCATTER_TO_CQE");
	return v && !strcmp(v, "0"); // exactly libmlx5's use_scatter_to_cqe() test
}

int gdr_scatter_guard(int recv_devmem, int probe, int dv) {
	if (!recv_devmem || probe == GDR_MLX5_ABSENT || probe == GDR_MLX5_NOT)
		return 0;
	if (dv && probe == GDR_MLX5_DV)
		return 0;
	return gdr_scatter_env_off() ? 0 : EPERM;
}

int gdr_sq_sig_all(void) { return GDR_SQ_SIG_ALL; }

struct ibv_qp *gdr_create_rc_qp(struct ibv_pd *pd, struct ibv_cq *scq, struct ibv_cq *rcq,
	uint32_t max_send_wr, uint32_t max_recv_wr, uint32_t max_inline, int recv_devmem, int dv,
	uint32_t *got_inline, int *err) {
	struct ibv_qp_init_attr_ex a;
	int probe = gdr_mlx5_probe(pd->context);
	// The last line of defence: a QP whose receives land in device memory
	// is never created with libmlx5's scatter-to-CQE on (the CPU would
	// copy small SENDs into GPU memory inside ibv_poll_cq and fault).
	if ((*err = gdr_scatter_guard(recv_devmem, probe, dv)))
		return NULL;
	memset(&a, 0, sizeof a);
	a.send_cq = scq;
	a.recv_cq = rcq;
	a.qp_type = IBV_QPT_RC;
	a.sq_sig_all = GDR_SQ_SIG_ALL;
	a.cap.max_send_wr = max_send_wr;
	a.cap.max_recv_wr = max_recv_wr;
	a.cap.max_send_sge = 1;
	a.cap.max_recv_sge = 1;
	a.cap.max_inline_data = max_inline;
	a.pd = pd;
	a.comp_mask = IBV_QP_INIT_ATTR_PD;
	errno = 0;
	struct ibv_qp *qp;
	if (dv) {
		if (probe != GDR_MLX5_DV) {
			*err = EINVAL;
			return NULL;
		}
		struct mlx5dv_qp_init_attr m;
		memset(&m, 0, sizeof m);
		m.comp_mask = MLX5DV_QP_INIT_ATTR_MASK_QP_CREATE_FLAGS;
		m.create_flags = MLX5DV_QP_CREATE_DISABLE_SCATTER_TO_CQE;
		qp = M.create_qp(pd->context, &a, &m);
	} else {
		// ibv_create_qp takes the non-extended attributes, a prefix of
		// ibv_qp_init_attr_ex.
		qp = G.create_qp(pd, (struct ibv_qp_init_attr *)&a);
	}
	*err = qp ? 0 : (errno ? errno : ENOMEM);
	if (qp)
		*got_inline = a.cap.max_inline_data;
	return qp;
}
int gdr_destroy_qp(struct ibv_qp *qp) { errno = 0; return rc_errno(G.destroy_qp(qp)); }
uint32_t gdr_qp_num(struct ibv_qp *qp) { return qp->qp_num; }

int gdr_qp_init(struct ibv_qp *qp, uint8_t port, int access) {
	struct ibv_qp_attr a;
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_INIT;
	a.pkey_index = 0;
	a.port_num = port;
	a.qp_access_flags = access;
	errno = 0;
	return rc_errno(G.modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS));
}

// sl and tclass are the fabric class both hosts agreed (GDR_IB_SL,
// GDR_IB_TC): the service level goes into the address vector on every
// fabric, the traffic class into the GRH (RoCE, or IB across subnets), as
// perftest's ctx_modify_qp_to_rtr and NCCL's ncclIbQpRtr
// (src/transport/net_ib/connect.cc) set them.
int gdr_qp_rtr(struct ibv_qp *qp, uint8_t port, int mtu_enum, uint32_t dest_qpn, uint32_t rq_psn,
	uint16_t dlid, int global, const uint8_t dgid[16], uint8_t sgid_index, uint8_t max_dest_rd_atomic,
	uint8_t sl, uint8_t tclass) {
	struct ibv_qp_attr a;
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = (enum ibv_mtu)mtu_enum;
	a.dest_qp_num = dest_qpn;
	a.rq_psn = rq_psn;
	a.max_dest_rd_atomic = max_dest_rd_atomic;
	a.min_rnr_timer = 12;
	a.ah_attr.port_num = port;
	a.ah_attr.dlid = dlid;
	a.ah_attr.sl = sl;
	a.ah_attr.src_path_bits = 0;
	if (global) {
		a.ah_attr.is_global = 1;
		memcpy(a.ah_attr.grh.dgid.raw, dgid, 16);
		a.ah_attr.grh.sgid_index = sgid_index;
		a.ah_attr.grh.hop_limit = 64;
		a.ah_attr.grh.traffic_class = tclass;
		a.ah_attr.grh.flow_label = 0;
	}
	errno = 0;
	return rc_errno(G.modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
		IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER));
}

int gdr_qp_rts(struct ibv_qp *qp, uint32_t sq_psn, uint8_t max_rd_atomic, uint8_t timeout, uint8_t retry) {
	struct ibv_qp_attr a;
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = sq_psn;
	a.timeout = timeout;
	a.retry_cnt = retry;
	a.rnr_retry = 7; // infinite: a receiver that is late posting must not kill the QP
	a.max_rd_atomic = max_rd_atomic;
	errno = 0;
	return rc_errno(G.modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
		IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC));
}

// A QP moved to ERR flushes every outstanding WR with WR_FLUSH_ERR, which
// ends a polling loop on another thread (harness/rc's budget watchdog).
int gdr_qp_to_err(struct ibv_qp *qp) {
	struct ibv_qp_attr a;
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_ERR;
	errno = 0;
	return rc_errno(G.modify_qp(qp, &a, IBV_QP_STATE));
}

const char *gdr_wc_status_str(int status) {
	if (!G.wc_status_str) // an error formatted before libibverbs was loaded
		return "(libibverbs not loaded)";
	return G.wc_status_str((enum ibv_wc_status)status);
}

#define STACK_WRS 16

int gdr_post_send(struct ibv_qp *qp, const gdr_wr *w, int n, int *bad) {
	struct ibv_send_wr swr[STACK_WRS], *wr = swr, *badwr = NULL;
	struct ibv_sge ssge[STACK_WRS], *sge = ssge;
	*bad = -1;
	if (n <= 0)
		return EINVAL;
	if (n > STACK_WRS) {
		wr = calloc(n, sizeof *wr);
		sge = calloc(n, sizeof *sge);
		if (!wr || !sge) {
			free(wr);
			free(sge);
			return ENOMEM;
		}
	}
	memset(wr, 0, n * sizeof *wr);
	for (int i = 0; i < n; i++) {
		sge[i].addr = w[i].laddr;
		sge[i].length = w[i].len;
		sge[i].lkey = w[i].lkey;
		wr[i].wr_id = w[i].wr_id;
		wr[i].sg_list = &sge[i];
		wr[i].num_sge = w[i].len ? 1 : 0;
		wr[i].opcode = (enum ibv_wr_opcode)w[i].opcode;
		wr[i].send_flags = (unsigned)w[i].flags;
		wr[i].imm_data = htobe32(w[i].imm);
		wr[i].wr.rdma.remote_addr = w[i].raddr;
		wr[i].wr.rdma.rkey = w[i].rkey;
		wr[i].next = i + 1 < n ? &wr[i + 1] : NULL;
	}
	int rc = ibv_post_send(qp, wr, &badwr);
	if (rc && badwr)
		*bad = (int)(badwr - wr);
	if (wr != swr) {
		free(wr);
		free(sge);
	}
	return rc;
}

int gdr_post_recv(struct ibv_qp *qp, const gdr_wr *w, int n, int *bad) {
	struct ibv_recv_wr swr[STACK_WRS], *wr = swr, *badwr = NULL;
	struct ibv_sge ssge[STACK_WRS], *sge = ssge;
	*bad = -1;
	if (n <= 0)
		return EINVAL;
	if (n > STACK_WRS) {
		wr = calloc(n, sizeof *wr);
		sge = calloc(n, sizeof *sge);
		if (!wr || !sge) {
			free(wr);
			free(sge);
			return ENOMEM;
		}
	}
	memset(wr, 0, n * sizeof *wr);
	for (int i = 0; i < n; i++) {
		sge[i].addr = w[i].laddr;
		sge[i].length = w[i].len;
		sge[i].lkey = w[i].lkey;
		wr[i].wr_id = w[i].wr_id;
		wr[i].sg_list = &sge[i];
		wr[i].num_sge = w[i].len ? 1 : 0;
		wr[i].next = i + 1 < n ? &wr[i + 1] : NULL;
	}
	int rc = ibv_post_recv(qp, wr, &badwr);
	if (rc && badwr)
		*bad = (int)(badwr - wr);
	if (wr != swr) {
		free(wr);
		free(sge);
	}
	return rc;
}

int64_t gdr_now_ns(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

// Spinning waits check the clock every SPIN_CHECK empty rounds, and once a
// wait has lasted YIELD_AFTER_NS they yield the CPU at each check: on a
// one-CPU VM the kernel thread that completes our work needs it (measured in
// the Soft-RoCE lab: 1 MiB WRITE bandwidth x1.8, WRITE latency p99 /2), while
// single waits on hardware NICs (microseconds) end before they would ever
// yield. Bandwidth loops wait a whole moderation window between completions
// (milliseconds at 1 MiB): the caller passes their threshold
// (gdr_bw_args.yield_after_ns).
#define SPIN_CHECK 64
#define YIELD_AFTER_NS 20000

// spin_check is called every SPIN_CHECK empty rounds of a wait that began at
// start; it yields once the wait is longer than yield_after, and returns 1
// when the deadline has passed.
static inline int spin_check(int64_t start, int64_t deadline, int64_t yield_after) {
	int64_t now = gdr_now_ns();
	if (now > deadline)
		return 1;
	if (now - start > yield_after)
		sched_yield();
	return 0;
}

int gdr_poll(struct ibv_cq *cq, gdr_wc *out, int max, int min, int64_t timeout_ns) {
	struct ibv_wc wc[32];
	int got = 0, spins = 0;
	int64_t start = gdr_now_ns(), deadline = start + timeout_ns;
	if (min > max)
		min = max;
	while (got < max) {
		int want = max - got;
		if (want > 32)
			want = 32;
		int n = ibv_poll_cq(cq, want, wc);
		if (n < 0)
			return n < -1 ? n : -EIO;
		for (int i = 0; i < n; i++) {
			gdr_wc *o = &out[got + i];
			o->wr_id = wc[i].wr_id;
			o->status = wc[i].status;
			o->opcode = wc[i].opcode;
			o->byte_len = wc[i].byte_len;
			o->imm = (wc[i].wc_flags & IBV_WC_WITH_IMM) ? be32toh(wc[i].imm_data) : 0;
			o->vendor_err = wc[i].vendor_err;
			o->wc_flags = wc[i].wc_flags;
			o->qp_num = wc[i].qp_num;
			o->pad = 0;
		}
		got += n;
		if (got >= min && (n < want || got >= max))
			break;
		if (n == 0 && ++spins % SPIN_CHECK == 0 && spin_check(start, deadline, YIELD_AFTER_NS))
			break;
	}
	return got;
}

int gdr_wait_u8(uintptr_t addr, uint8_t want, int64_t timeout_ns) {
	volatile uint8_t *p = (volatile uint8_t *)addr;
	int64_t start = gdr_now_ns(), deadline = start + timeout_ns;
	int spins = 0;
	while (*p != want) {
		if (++spins % SPIN_CHECK == 0 && spin_check(start, deadline, YIELD_AFTER_NS))
			return ETIMEDOUT;
	}
	return 0;
}

// poll_one waits for one completion on cq; returns 0, ETIMEDOUT, or EIO with
// *wc_status set for a failed completion.
static int poll_one(struct ibv_cq *cq, int64_t timeout_ns, int *wc_status, struct ibv_wc *wc) {
	int64_t start = gdr_now_ns(), deadline = start + timeout_ns;
	int spins = 0;
	for (;;) {
		int n = ibv_poll_cq(cq, 1, wc);
		if (n < 0)
			return EIO;
		if (n == 1) {
			if (wc->status != IBV_WC_SUCCESS) {
				*wc_status = wc->status;
				return EIO;
			}
			return 0;
		}
		if (++spins % SPIN_CHECK == 0 && spin_check(start, deadline, YIELD_AFTER_NS))
			return ETIMEDOUT;
	}
}

static int post_recv0(struct ibv_qp *qp) {
	struct ibv_recv_wr wr, *bad;
	memset(&wr, 0, sizeof wr);
	return ibv_post_recv(qp, &wr, &bad);
}

int gdr_lat(const gdr_lat_args *a, int64_t *stamps, int *wc_status, int *done) {
	struct ibv_sge sge = {.addr = a->laddr, .length = a->size, .lkey = a->lkey};
	struct ibv_send_wr wr, *bad;
	struct ibv_wc wc;
	volatile uint8_t *post_buf = (volatile uint8_t *)(a->laddr + a->size - 1);
	int scnt = 0, rcnt = 0, outstanding = 0, rc;
	*wc_status = -1;
	*done = 0;
	memset(&wr, 0, sizeof wr);
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = a->use_imm ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE;
	wr.wr.rdma.remote_addr = a->raddr;
	wr.wr.rdma.rkey = a->rkey;
	if (a->use_imm) {
		// Two receives stay posted; the caller posts them before the
		// barrier both sides pass, so the peer's first write cannot find
		// none (an RNR NAK and a retry, which the NIC counts).
		for (int i = a->preposted; i < 2 && i < a->iters; i++)
			if ((rc = post_recv0(a->qp)))
				return rc;
	}
	while (scnt < a->iters || rcnt < a->iters) {
		if (rcnt < a->iters && !(scnt < 1 && a->first)) {
			rcnt++;
			if (a->use_imm) {
				if ((rc = poll_one(a->rcq, a->timeout_ns, wc_status, &wc)))
					return rc;
				if (rcnt + 1 < a->iters && (rc = post_recv0(a->qp)))
					return rc;
			} else {
				rc = gdr_wait_u8(a->poll_addr, (uint8_t)rcnt, a->timeout_ns);
				if (rc)
					return rc;
			}
		}
		if (scnt < a->iters) {
			stamps[scnt] = gdr_now_ns();
			scnt++;
			if (!a->use_imm)
				*post_buf = (uint8_t)scnt; // the tag the peer waits for
			wr.imm_data = htobe32((uint32_t)scnt);
			wr.wr_id = (uint64_t)scnt;
			wr.send_flags = IBV_SEND_SIGNALED | (a->inline_ok ? IBV_SEND_INLINE : 0);
			if ((rc = ibv_post_send(a->qp, &wr, &bad)))
				return rc;
			outstanding++;
		}
		// Reap send completions without waiting unless the queue is full.
		while (outstanding > 0) {
			int n = ibv_poll_cq(a->scq, 1, &wc);
			if (n < 0)
				return EIO;
			if (n == 0) {
				if (outstanding < a->sq_depth - 1)
					break;
				if ((rc = poll_one(a->scq, a->timeout_ns, wc_status, &wc)))
					return rc;
				outstanding--;
				continue;
			}
			if (wc.status != IBV_WC_SUCCESS) {
				*wc_status = wc.status;
				return EIO;
			}
			outstanding--;
		}
		*done = rcnt < scnt ? rcnt : scnt;
	}
	while (outstanding > 0) {
		if ((rc = poll_one(a->scq, a->timeout_ns, wc_status, &wc)))
			return rc;
		outstanding--;
	}
	*done = a->iters;
	return 0;
}

// bw_loop posts iters WRs as ib_write_bw does (at most tx_depth
// outstanding, every cq_mod-th and the last signaled) and waits for them;
// *start_ns is the first post, *end_ns the last completion.
static int bw_loop(const gdr_bw_args *a, int iters, int64_t *start_ns, int64_t *end_ns, int *wc_status, int *done) {
	struct ibv_sge sge = {.addr = a->laddr, .length = a->size, .lkey = a->lkey};
	struct ibv_send_wr wr, *bad;
	struct ibv_wc wc[16];
	int scnt = 0, ccnt = 0, rc, spins = 0;
	int cq_mod = a->cq_mod < 1 ? 1 : a->cq_mod;
	int64_t start = 0, last = gdr_now_ns();
	int64_t yield_after = a->yield_after_ns > 0 ? a->yield_after_ns : YIELD_AFTER_NS;
	*done = 0;
	memset(&wr, 0, sizeof wr);
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = (enum ibv_wr_opcode)a->opcode;
	wr.wr.rdma.remote_addr = a->raddr;
	wr.wr.rdma.rkey = a->rkey;
	while (ccnt < iters) {
		while (scnt < iters && scnt - ccnt < a->tx_depth) {
			wr.wr_id = (uint64_t)scnt;
			// ib_write_bw signals every cq_mod-th WR and the last one; a
			// completion then accounts for all WRs since the previous one.
			wr.send_flags = (scnt % cq_mod == cq_mod - 1 || scnt == iters - 1) ? IBV_SEND_SIGNALED : 0;
			if (scnt == 0)
				start = gdr_now_ns();
			if ((rc = ibv_post_send(a->qp, &wr, &bad)))
				return rc;
			scnt++;
		}
		int n = ibv_poll_cq(a->scq, 16, wc);
		if (n < 0)
			return EIO;
		for (int i = 0; i < n; i++) {
			if (wc[i].status != IBV_WC_SUCCESS) {
				*wc_status = wc[i].status;
				*done = ccnt;
				return EIO;
			}
			int id = (int)wc[i].wr_id;
			ccnt = id + 1; // everything up to a signaled WR is complete
		}
		if (n > 0) {
			last = gdr_now_ns();
			*done = ccnt;
		} else if (++spins % SPIN_CHECK == 0 && spin_check(last, last + a->timeout_ns, yield_after)) {
			return ETIMEDOUT; // no progress for timeout_ns
		}
	}
	*end_ns = gdr_now_ns();
	*start_ns = start;
	return 0;
}

int gdr_gate_wait(int32_t *gate, int32_t n, int64_t timeout_ns) {
	__atomic_add_fetch(gate, 1, __ATOMIC_ACQ_REL);
	int64_t deadline = gdr_now_ns() + timeout_ns;
	int spins = 0;
	while (__atomic_load_n(gate, __ATOMIC_ACQUIRE) < n) {
		// Nothing is timed yet: yield, so that a thread still warming up
		// on the same CPU gets it.
		if (++spins % SPIN_CHECK == 0) {
			if (gdr_now_ns() > deadline)
				return ETIME;
			sched_yield();
		}
	}
	return 0;
}

int32_t gdr_gate_count(int32_t *gate) { return __atomic_load_n(gate, __ATOMIC_ACQUIRE); }

int gdr_bw(const gdr_bw_args *a, int64_t *start_ns, int64_t *end_ns, int *wc_status, int *done) {
	int64_t ws = 0, we = 0;
	int rc = 0;
	*wc_status = -1;
	*start_ns = *end_ns = 0;
	// The warm-up (untimed) brings QP, MR and page-table caches into use,
	// so the timed run measures the steady state.
	if (a->warmup > 0)
		rc = bw_loop(a, a->warmup, &ws, &we, wc_status, done);
	if (a->gate) {
		// A failed warm-up still arrives (and does not wait), so the
		// other queue pairs' loops are not held until they time out.
		if (rc) {
			__atomic_add_fetch(a->gate, 1, __ATOMIC_ACQ_REL);
			return rc;
		}
		if ((rc = gdr_gate_wait(a->gate, a->gate_n, a->timeout_ns)))
			return rc;
	}
	if (rc)
		return rc;
	return bw_loop(a, a->iters, start_ns, end_ns, wc_status, done);
}

// For tests without an RDMA device: gdr_mlx5_probe on a stand-in device
// called name (zeroed past its ibv_device, as a verbs_device of no provider
// would be), and loading libmlx5.so.1 as libibverbs would for an mlx5 NIC.
int gdr_probe_standin(const char *name) {
	struct ibv_context ctx;
	void *dev = calloc(1, 4096);
	if (!dev)
		return -ENOMEM;
	memset(&ctx, 0, sizeof ctx);
	snprintf(((struct ibv_device *)dev)->name, IBV_SYSFS_NAME_MAX, "%s", name);
	ctx.device = dev;
	int k = gdr_mlx5_probe(&ctx);
	free(dev);
	return k;
}
int gdr_mlx5_loaded(void) { return dlopen("libmlx5.so.1", RTLD_NOW | RTLD_NOLOAD) != NULL; }
int gdr_load_mlx5(void) { return dlopen("libmlx5.so.1", RTLD_NOW | RTLD_GLOBAL) != NULL; }
int gdr_mlx5_has_dv(void) { return M.create_qp != NULL; }
