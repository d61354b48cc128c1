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
extern "C" __global__ void sgd_step(DT<VD>::S* p, const DT<VD>::S* g, DT<VD>::S* buf, i64 n, double neglrd,
				    double momd, double damp1d, double wdd, int hasbuf, int first, int nesterov) {
	typedef DT<VD>::C C;
	const C neglr = (C)neglrd, mom = (C)momd, damp1 = (C)damp1d, wd = (C)wdd;
	for (i64 i = GTID; i < n; i += GNTH) {
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
#endif

#endif
