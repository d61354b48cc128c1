// optim.cu: fused optimizer steps on the module's dtype VD (a -D option):
// one kernel does the whole update of one parameter, reading and writing
// each element once. The math runs in the compute type (float32, float64
// for float64), with correctly rounded operations (no contraction into
// fused multiply-adds), in the order of the composed ops of package optim.

#if VD == DT_F32 || VD == DT_F64 || VD == DT_F16 || VD == DT_BF16

__device__ __forceinline__ float r_add(float a, float b) { return __fadd_rn(a, b); }
__device__ __forceinline__ double r_add(double a, double b) { return __dadd_rn(a, b); }
__device__ __forceinline__ float r_mul(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ double r_mul(double a, double b) { return __dmul_rn(a, b); }
__device__ __forceinline__ float r_div(float a, float b) { return __fdiv_rn(a, b); }
__device__ __forceinline__ double r_div(double a, double b) { return __ddiv_rn(a, b); }
__device__ __forceinline__ float r_sqrt(float a) { return __fsqrt_rn(a); }
__device__ __forceinline__ double r_sqrt(double a) { return __dsqrt_rn(a); }

#if defined(K_ALL) || defined(K_adam)

// adam_step: for each of the n contiguous elements,
//
//	g = g + wd·p                 (decoupled == 0; wd may be 0)
//	p = p·decay                  (decoupled != 0; decay = 1 - lr·wd)
//	m = b1·m + (1 - b1)·g
//	v = b2·v + (1 - b2)·g·g
//	p = p + neg_step·(m / (sqrt(v)/sqrt_bc2 + eps))
//
// with neg_step = -lr/(1 - b1^t) and sqrt_bc2 = sqrt(1 - b2^t) computed on
// the host in float64. The scalars arrive as doubles.
extern "C" __global__ void adam_step(DT<VD>::S* p, const DT<VD>::S* g, DT<VD>::S* m, DT<VD>::S* v, i64 n,
				     double b1d, double b2d, double epsd, double wdd, double decayd, double negstepd,
				     double sqrtbc2d, int decoupled) {
	typedef DT<VD>::C C;
	const C b1 = (C)b1d, ob1 = (C)(1 - b1d), b2 = (C)b2d, ob2 = (C)(1 - b2d), eps = (C)epsd, wd = (C)wdd,
		decay = (C)decayd, negstep = (C)negstepd, sqrtbc2 = (C)sqrtbc2d;
	for (i64 i = GTID; i < n; i += GNTH) {
		C pi = ldc<VD>(p[i]), gi = ldc<VD>(g[i]);
		if (decoupled) {
			if (decayd != 1) pi = ldc<VD>(st<VD>(r_mul(pi, decay)));
		} else if (wdd != 0) {
			gi = r_add(gi, r_mul(pi, wd));
		}
		C mi = r_add(r_mul(ldc<VD>(m[i]), b1), r_mul(gi, ob1));
		C vi = r_add(r_mul(ldc<VD>(v[i]), b2), r_mul(r_mul(gi, gi), ob2));
		DT<VD>::S ms = st<VD>(mi), vs = st<VD>(vi);
		m[i] = ms;
		v[i] = vs;
		mi = ldc<VD>(ms);
		vi = ldc<VD>(vs);
		C denom = r_add(r_div(r_sqrt(vi), sqrtbc2), eps);
		p[i] = st<VD>(r_add(pi, r_mul(negstep, r_div(mi, denom))));
	}
}

#endif

#if defined(K_ALL) || defined(K_sgd)
// sgd_step: for each of the n contiguous elements,
//
//	d = g + wd·p                                  (wd may be 0)
//	buf = d (first step) or mom·buf + damp1·d     (momentum: hasbuf != 0)
//	d = d + mom·buf (nesterov) or buf             (momentum)
//	p = p + neglr·d
//
// with damp1 = 1 - dampening and neglr = -lr; buf is rounded to the dtype
// when stored, and the update reads it back. The scalars arrive as doubles.
template <typename C>
__device__ __forceinline__ void sgd_elems(DT<VD>::S* p, const DT<VD>::S* g, DT<VD>::S* buf, i64 n, i64 i0, i64 step,
					  C neglr, C mom, C damp1, C wd, double wdd, int hasbuf, int first,
					  int nesterov) {
	for (i64 i = i0; i < n; i += step) {
		C pi = ldc<VD>(p[i]), d = ldc<VD>(g[i]);
		if (wdd != 0) d = r_add(d, r_mul(pi, wd));
		if (hasbuf) {
			C b = first ? d : r_add(r_mul(ldc<VD>(buf[i]), mom), r_mul(d, damp1));
			DT<VD>::S bs = st<VD>(b);
			buf[i] = bs;
			b = ldc<VD>(bs);
			d = nesterov ? r_add(d, r_mul(b, mom)) : b;
		}
		p[i] = st<VD>(r_add(pi, r_mul(neglr, d)));
	}
}

extern "C" __global__ void sgd_step(DT<VD>::S* p, const DT<VD>::S* g, DT<VD>::S* buf, i64 n, double neglrd,
				    double momd, double damp1d, double wdd, int hasbuf, int first, int nesterov) {
	typedef DT<VD>::C C;
	sgd_elems<C>(p, g, buf, n, GTID, GNTH, (C)neglrd, (C)momd, (C)damp1d, (C)wdd, wdd, hasbuf, first, nesterov);
}

// sgd_multi: sgd_step for nt <= SGD_MAX parameters in one launch. Parameter
// t takes ceil(n_t / SGD_TILE) consecutive blocks of the one-dimensional
// grid, in order, each block one tile of SGD_TILE elements; the host sizes
// the grid to the sum. Bit t of first marks parameter t's first step. The
// addresses and sizes are kernel parameters (32 bytes a parameter, 2 KiB in
// all, within the 4 KiB every CUDA version takes), so that nothing is copied
// to the device per step, and each block picks its own by comparisons
// alone: an array of them indexed by t would live in local memory, stored
// by every thread. Parameter t = 8·hi + lo is named p<hi><lo> (g, m and n
// likewise).
#define SGD_MAX 64
#ifndef SGD_TILE
#define SGD_TILE 4096
#endif
#define SGD_T(hi, lo) DT<VD>::S *p##hi##lo, const DT<VD>::S *g##hi##lo, DT<VD>::S *m##hi##lo, i64 n##hi##lo
#define SGD_T8(hi) SGD_T(hi, 0), SGD_T(hi, 1), SGD_T(hi, 2), SGD_T(hi, 3), SGD_T(hi, 4), SGD_T(hi, 5), SGD_T(hi, 6), SGD_T(hi, 7)
extern "C" __global__ void sgd_multi(double neglrd, double momd, double damp1d, double wdd, int hasbuf, int nesterov,
				     int nt, u64 first, SGD_T8(0), SGD_T8(1), SGD_T8(2), SGD_T8(3), SGD_T8(4),
				     SGD_T8(5), SGD_T8(6), SGD_T8(7)) {
	typedef DT<VD>::C C;
	const i64 blk = blockIdx.x;
	i64 start = 0; // the first block of parameter t
#define SGD_PICK(hi, lo)                                                                                   \
	if (8 * hi + lo < nt) {                                                                            \
		const i64 nb = (n##hi##lo + SGD_TILE - 1) / SGD_TILE;                                      \
		if (blk < start + nb) {                                                                    \
			const i64 off = (blk - start) * SGD_TILE;                                          \
			sgd_elems<C>(p##hi##lo + off, g##hi##lo + off, hasbuf ? m##hi##lo + off : m##hi##lo,     \
				     (n##hi##lo - off < SGD_TILE ? n##hi##lo - off : (i64)SGD_TILE), (i64)threadIdx.x, \
				     (i64)blockDim.x, (C)neglrd, (C)momd, (C)damp1d, (C)wdd, wdd, hasbuf,          \
				     (int)((first >> (8 * hi + lo)) & 1), nesterov);                               \
			return;                                                                            \
		}                                                                                          \
		start += nb;                                                                               \
	}
#define SGD_PICK8(hi)                                                                                      \
	SGD_PICK(hi, 0) SGD_PICK(hi, 1) SGD_PICK(hi, 2) SGD_PICK(hi, 3) SGD_PICK(hi, 4) SGD_PICK(hi, 5)   \
	SGD_PICK(hi, 6) SGD_PICK(hi, 7)
	SGD_PICK8(0) SGD_PICK8(1) SGD_PICK8(2) SGD_PICK8(3) SGD_PICK8(4) SGD_PICK8(5) SGD_PICK8(6) SGD_PICK8(7)
#undef SGD_PICK8
#undef SGD_PICK
}
#undef SGD_T8
#undef SGD_T
#endif

#if defined(K_ALL) || defined(K_unscale)
// unscale_step: a GradScaler's unscale and inf/NaN check over nt <= 28
// contiguous gradients of the module's dtype at once (one launch for the
// set, the addresses and element counts passed by value): every element
// becomes g·inv, rounded to the dtype, and *found becomes 1 when an element
// was inf or NaN before or after (left as it was otherwise). The product
// runs in the compute type, inv rounded to it. Each thread strides over
// every gradient in turn.
#define UNSCALE_MAX 28
typedef DT<VD>::S unscale_s;
extern "C" __global__ void unscale_step(float* found, double invd, int nt,
				       unscale_s* g0, unscale_s* g1, unscale_s* g2, unscale_s* g3,
				       unscale_s* g4, unscale_s* g5, unscale_s* g6, unscale_s* g7,
				       unscale_s* g8, unscale_s* g9, unscale_s* g10, unscale_s* g11,
				       unscale_s* g12, unscale_s* g13, unscale_s* g14, unscale_s* g15,
				       unscale_s* g16, unscale_s* g17, unscale_s* g18, unscale_s* g19,
				       unscale_s* g20, unscale_s* g21, unscale_s* g22, unscale_s* g23,
				       unscale_s* g24, unscale_s* g25, unscale_s* g26, unscale_s* g27,
				       i64 n0, i64 n1, i64 n2, i64 n3, i64 n4, i64 n5, i64 n6, i64 n7,
				       i64 n8, i64 n9, i64 n10, i64 n11, i64 n12, i64 n13, i64 n14,
				       i64 n15, i64 n16, i64 n17, i64 n18, i64 n19, i64 n20, i64 n21,
				       i64 n22, i64 n23, i64 n24, i64 n25, i64 n26, i64 n27) {
	typedef DT<VD>::C C;
	unscale_s* const gs[UNSCALE_MAX] = {g0, g1, g2, g3, g4, g5, g6, g7, g8, g9, g10, g11, g12, g13,
					     g14, g15, g16, g17, g18, g19, g20, g21, g22, g23, g24, g25,
					     g26, g27};
	const i64 ns[UNSCALE_MAX] = {n0, n1, n2, n3, n4, n5, n6, n7, n8, n9, n10, n11, n12, n13, n14,
				      n15, n16, n17, n18, n19, n20, n21, n22, n23, n24, n25, n26, n27};
	const C inv = (C)invd;
	const C big = (C)(sizeof(C) == 4 ? 3.4028234663852886e38 : 1.7976931348623157e308);
	bool bad = false;
	for (int t = 0; t < nt && t < UNSCALE_MAX; t++) {
		unscale_s* const g = gs[t];
		const i64 n = ns[t];
		for (i64 i = GTID; i < n; i += GNTH) {
			const C x = ldc<VD>(g[i]);
			const unscale_s ys = st<VD>(r_mul(x, inv));
			g[i] = ys;
			const C y = ldc<VD>(ys);
			// A comparison with NaN is false: NaN fails both tests.
			bad |= !(x >= -big && x <= big) || !(y >= -big && y <= big);
		}
	}
	if (bad) *found = 1.0f;
}
#endif

#endif
