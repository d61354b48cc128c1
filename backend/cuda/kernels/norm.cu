// norm.cu: batch normalization of channels-last (NHWC) tensors, whose
// values of one channel lie C elements apart. The tensor is read as M rows
// (M = N·H·W) of C channels. Blocks are NB_TX threads wide and NB_TY rows
// tall, and each thread takes V neighbouring channels (V = 2 for the
// kernels named …2, with one 4- or 8-byte load; V = 1 otherwise): the
// threads of a warp read NB_TX·V neighbouring channels of one row, so
// every load is coalesced, and each thread walks its channels down the
// rows with a stride of gridDim.y·NB_TY. Statistics are reduced in two
// steps without atomics, so the results do not depend on scheduling: each
// block row writes its partial sums to a buffer of 2·gridDim.y·C floats,
// and a finishing kernel adds them per channel in float64, NB_FY threads a
// channel.
//
// Sums of the forward pass are taken about a shift, the channel's value in
// row 0, so that Σ(x−s)² − (Σ(x−s))²/M loses little to cancellation when
// the mean is far from zero. Per-channel tensors (scale, bias, statistics)
// are float32, as cuDNN takes them; the saved statistics are the mean and
// 1/sqrt(var + eps), as cuDNN saves them, so either side may run the
// backward pass of the other's forward.

#if VD == DT_F32 || VD == DT_F16 || VD == DT_BF16

#define NB_TX 32
#define NB_TY 8
#define NB_FY 32

#if defined(K_ALL) || defined(K_bn)

typedef DT<VD>::S S;

// ldv loads V neighbouring values at p (aligned to V elements).
template <int V> __device__ __forceinline__ void ldv(const S* p, float* v);
template <> __device__ __forceinline__ void ldv<1>(const S* p, float* v) { v[0] = ldc<VD>(p[0]); }
template <> __device__ __forceinline__ void ldv<2>(const S* p, float* v) {
#if VD == DT_F32
	float2 f = *(const float2*)p;
	v[0] = f.x;
	v[1] = f.y;
#else
	unsigned u = *(const unsigned*)p;
	v[0] = ldc<VD>((unsigned short)(u & 0xffffu));
	v[1] = ldc<VD>((unsigned short)(u >> 16));
#endif
}

// stv stores V values at p (aligned to V elements).
template <int V> __device__ __forceinline__ void stv(S* p, const float* v);
template <> __device__ __forceinline__ void stv<1>(S* p, const float* v) { p[0] = st<VD>(v[0]); }
template <> __device__ __forceinline__ void stv<2>(S* p, const float* v) {
#if VD == DT_F32
	*(float2*)p = make_float2(v[0], v[1]);
#else
	*(unsigned*)p = (unsigned)st<VD>(v[0]) | ((unsigned)st<VD>(v[1]) << 16);
#endif
}

// partials reduces a[V], b[V] over the block's rows and writes them for
// block row blockIdx.y: part[y·C + c] and part[(gy + y)·C + c].
template <int V>
__device__ __forceinline__ void partials(float* a, float* b, int c0, int C, float* part) {
	__shared__ float sa[NB_TY][NB_TX * V + 1], sb[NB_TY][NB_TX * V + 1];
	const int tx = threadIdx.x, ty = threadIdx.y;
	for (int j = 0; j < V; j++) {
		sa[ty][tx * V + j] = a[j];
		sb[ty][tx * V + j] = b[j];
	}
	__syncthreads();
	if (ty == 0 && c0 < C) {
		for (int k = 1; k < NB_TY; k++)
			for (int j = 0; j < V; j++) {
				a[j] += sa[k][tx * V + j];
				b[j] += sb[k][tx * V + j];
			}
		for (int j = 0; j < V; j++) {
			part[(i64)blockIdx.y * C + c0 + j] = a[j];
			part[(i64)(gridDim.y + blockIdx.y) * C + c0 + j] = b[j];
		}
	}
}

// stats: Σ (x − s) and Σ (x − s)² per channel over the block's rows, with
// s = x[0, c].
template <int V> __device__ __forceinline__ void stats(const S* x, i64 M, int C, float* part) {
	const int c0 = (blockIdx.x * NB_TX + threadIdx.x) * V;
	float a[V], b[V], s[V], v[V];
	for (int j = 0; j < V; j++) a[j] = b[j] = 0;
	if (c0 < C) {
		ldv<V>(x + c0, s);
		for (i64 r = (i64)blockIdx.y * NB_TY + threadIdx.y; r < M; r += (i64)gridDim.y * NB_TY) {
			ldv<V>(x + r * C + c0, v);
			for (int j = 0; j < V; j++) {
				const float d = v[j] - s[j];
				a[j] += d;
				b[j] = fmaf(d, d, b[j]);
			}
		}
	}
	partials<V>(a, b, c0, C, part);
}

// bn_nhwc_stats: part[y·C + c] = Σ (x − s), part[(gy + y)·C + c] = Σ (x − s)²
// over the rows of block row y, with s = x[0, c].
extern "C" __global__ void bn_nhwc_stats(const S* x, i64 M, int C, float* part) { stats<1>(x, M, C, part); }
extern "C" __global__ void bn_nhwc_stats2(const S* x, i64 M, int C, float* part) { stats<2>(x, M, C, part); }

// sumParts adds the gy partial sums of channel c in float64, the NB_FY
// threads of column threadIdx.x taking every NB_FY-th block row; thread
// row 0 gets the totals.
__device__ __forceinline__ void sumParts(const float* part, int gy, int C, int c, double* a, double* b) {
	__shared__ double fa[NB_FY][NB_TX + 1], fb[NB_FY][NB_TX + 1];
	const int tx = threadIdx.x, ty = threadIdx.y;
	double x = 0, y = 0;
	if (c < C)
		for (int k = ty; k < gy; k += NB_FY) {
			x += part[(i64)k * C + c];
			y += part[(i64)(gy + k) * C + c];
		}
	fa[ty][tx] = x;
	fb[ty][tx] = y;
	__syncthreads();
	if (ty == 0) {
		for (int k = 1; k < NB_FY; k++) {
			x += fa[k][tx];
			y += fb[k][tx];
		}
	}
	*a = x;
	*b = y;
}

// bn_nhwc_finish: the mean and 1/sqrt(var + eps) of each channel from the
// gy block rows of partial sums; with run != 0, the running statistics
// move by momentum towards the batch's mean and unbiased variance. When
// count is not null, one thread adds 1 to it (the layer's count of
// batches, num_batches_tracked), which saves a launch of its own. Blocks
// of NB_TX × NB_FY threads, NB_TX channels each.
extern "C" __global__ void bn_nhwc_finish(const S* x, const float* part, int gy, int C, i64 M, double eps,
					  double momentum, int run, float* runMean, float* runVar, float* saveMean,
					  float* saveInvStd, long long* count) {
	const int c = blockIdx.x * NB_TX + threadIdx.x;
	double a, b;
	sumParts(part, gy, C, c, &a, &b);
	if (threadIdx.y != 0 || c >= C) return;
	if (count != nullptr && c == 0) *count += 1;
	const double m1 = a / (double)M;
	double var = b / (double)M - m1 * m1;
	if (var < 0) var = 0;
	const double mean = (double)ldc<VD>(x[c]) + m1;
	saveMean[c] = (float)mean;
	saveInvStd[c] = (float)(1.0 / sqrt(var + eps));
	if (run) {
		runMean[c] = (float)((1 - momentum) * (double)runMean[c] + momentum * mean);
		runVar[c] = (float)((1 - momentum) * (double)runVar[c] + momentum * var * (double)M / (double)(M - 1));
	}
}

// apply: y = x·g + h per channel, g = k·scale and h = bias − mean·g, with
// k = inv[c], or k = 1/sqrt(inv[c] + eps) when fromVar != 0 (inference:
// inv holds the running variance). When r is not null its element is
// added (a residual of x's shape), and with relu != 0 the result is
// max(0, ·): the whole of relu(bn(x) + r) in one pass.
template <int V>
__device__ __forceinline__ void apply(const S* x, S* y, i64 M, int C, const float* mean, const float* inv,
				      const float* scale, const float* bias, int fromVar, double eps, const S* r,
				      int relu) {
	const int c0 = (blockIdx.x * NB_TX + threadIdx.x) * V;
	if (c0 >= C) return;
	float g[V], h[V], v[V], w[V];
	for (int j = 0; j < V; j++) {
		const int c = c0 + j;
		const float k = fromVar ? (float)(1.0 / sqrt((double)inv[c] + eps)) : inv[c];
		g[j] = k * scale[c];
		h[j] = bias[c] - mean[c] * g[j];
	}
	for (i64 row = (i64)blockIdx.y * NB_TY + threadIdx.y; row < M; row += (i64)gridDim.y * NB_TY) {
		const i64 i = row * C + c0;
		ldv<V>(x + i, v);
		for (int j = 0; j < V; j++) v[j] = fmaf(v[j], g[j], h[j]);
		if (r) {
			ldv<V>(r + i, w);
			for (int j = 0; j < V; j++) v[j] += w[j];
		}
		if (relu)
			for (int j = 0; j < V; j++) v[j] = fmaxf(v[j], 0.0f);
		stv<V>(y + i, v);
	}
}

// bn_nhwc_apply: the normalization, see apply.
extern "C" __global__ void bn_nhwc_apply(const S* x, S* y, i64 M, int C, const float* mean, const float* inv,
					 const float* scale, const float* bias, int fromVar, double eps, const S* r,
					 int relu) {
	apply<1>(x, y, M, C, mean, inv, scale, bias, fromVar, eps, r, relu);
}
extern "C" __global__ void bn_nhwc_apply2(const S* x, S* y, i64 M, int C, const float* mean, const float* inv,
					  const float* scale, const float* bias, int fromVar, double eps, const S* r,
					  int relu) {
	apply<2>(x, y, M, C, mean, inv, scale, bias, fromVar, eps, r, relu);
}

// masked zeroes the gradients g[V] where the forward's ReLU output y is
// not above zero, when y is not null: the ReLU's backward pass, taken by
// the kernels below as they read dy.
template <int V> __device__ __forceinline__ void masked(const S* y, i64 i, float* g) {
	if (!y) return;
	float o[V];
	ldv<V>(y + i, o);
	for (int j = 0; j < V; j++)
		if (!(o[j] > 0.0f)) g[j] = 0.0f;
}

// gradIn loads the gradient g[V] that the backward kernels take at i: dy
// plus dy2 when dy2 is not null (the two parts of a gradient that nothing
// has added yet, such as a residual input's), rounded to S as a stored sum
// would be, then masked by the ReLU output y when y is not null.
template <int V>
__device__ __forceinline__ void gradIn(const S* dy, const S* dy2, const S* y, i64 i, float* g) {
	ldv<V>(dy + i, g);
	if (dy2) {
		float h[V];
		ldv<V>(dy2 + i, h);
		for (int j = 0; j < V; j++) g[j] = ldc<VD>(st<VD>(g[j] + h[j]));
	}
	masked<V>(y, i, g);
}

// bwdStats: Σ dy and Σ dy·(x − mean) per channel over the block's rows,
// dy taken by gradIn (dy + dy2, masked by y). When dst is not null the
// gradient taken is stored there, so that the second pass reads one
// tensor, already summed and masked, instead of two or three.
template <int V>
__device__ __forceinline__ void bwdStats(const S* dy, const S* x, i64 M, int C, const float* mean, float* part,
					 const S* y, const S* dy2, S* dst) {
	const int c0 = (blockIdx.x * NB_TX + threadIdx.x) * V;
	float a[V], b[V], mu[V], g[V], v[V];
	for (int j = 0; j < V; j++) a[j] = b[j] = 0;
	if (c0 < C) {
		for (int j = 0; j < V; j++) mu[j] = mean[c0 + j];
		for (i64 r = (i64)blockIdx.y * NB_TY + threadIdx.y; r < M; r += (i64)gridDim.y * NB_TY) {
			const i64 i = r * C + c0;
			gradIn<V>(dy, dy2, y, i, g);
			if (dst) stv<V>(dst + i, g);
			ldv<V>(x + i, v);
			for (int j = 0; j < V; j++) {
				a[j] += g[j];
				b[j] = fmaf(g[j], v[j] - mu[j], b[j]);
			}
		}
	}
	partials<V>(a, b, c0, C, part);
}

// bn_nhwc_bwd_stats: part[b·C + c] = Σ g, part[(gy + b)·C + c] =
// Σ g·(x − mean) over the rows of block row b, with g = dy (+ dy2 when
// not null), masked by the ReLU output y when y is not null, and stored
// in dst when dst is not null. dst may be dy (each element is read and
// written by one thread).
extern "C" __global__ void bn_nhwc_bwd_stats(const S* dy, const S* x, i64 M, int C, const float* mean, float* part,
					     const S* y, const S* dy2, S* dst) {
	bwdStats<1>(dy, x, M, C, mean, part, y, dy2, dst);
}
extern "C" __global__ void bn_nhwc_bwd_stats2(const S* dy, const S* x, i64 M, int C, const float* mean, float* part,
					      const S* y, const S* dy2, S* dst) {
	bwdStats<2>(dy, x, M, C, mean, part, y, dy2, dst);
}

// bn_nhwc_bwd_finish: dbias = Σ dy, dscale = Σ dy·(x − mean)·inv, and the
// two coefficients of the input gradient: coef[c] = Σ dy / M and
// coef[C + c] = Σ dy·(x − mean) / M · inv². Blocks as bn_nhwc_finish's.
extern "C" __global__ void bn_nhwc_bwd_finish(const float* part, int gy, int C, i64 M, const float* inv,
					      float* dscale, float* dbias, float* coef) {
	const int c = blockIdx.x * NB_TX + threadIdx.x;
	double a, b;
	sumParts(part, gy, C, c, &a, &b);
	if (threadIdx.y != 0 || c >= C) return;
	const double k = inv[c];
	dbias[c] = (float)a;
	dscale[c] = (float)(b * k);
	coef[c] = (float)(a / (double)M);
	coef[C + c] = (float)(b / (double)M * k * k);
}

// bwdApply: dx = scale·inv·(dy − coef[c] − (x − mean)·coef[C + c]), dy
// masked by the ReLU output y when y is not null, and the masked dy
// stored in dr (the residual's gradient) when dr is not null. dx may be
// dy: each element is read and written by one thread.
template <int V>
__device__ __forceinline__ void bwdApply(const S* dy, const S* x, S* dx, i64 M, int C, const float* mean,
					 const float* inv, const float* scale, const float* coef, const S* y, S* dr) {
	const int c0 = (blockIdx.x * NB_TX + threadIdx.x) * V;
	if (c0 >= C) return;
	float k[V], mu[V], m[V], q[V], g[V], v[V];
	for (int j = 0; j < V; j++) {
		const int c = c0 + j;
		k[j] = scale[c] * inv[c];
		mu[j] = mean[c];
		m[j] = coef[c];
		q[j] = coef[C + c];
	}
	for (i64 r = (i64)blockIdx.y * NB_TY + threadIdx.y; r < M; r += (i64)gridDim.y * NB_TY) {
		const i64 i = r * C + c0;
		ldv<V>(dy + i, g);
		masked<V>(y, i, g);
		if (dr) stv<V>(dr + i, g);
		ldv<V>(x + i, v);
		for (int j = 0; j < V; j++) g[j] = k[j] * (g[j] - m[j] - (v[j] - mu[j]) * q[j]);
		stv<V>(dx + i, g);
	}
}

// bn_nhwc_bwd_apply: the input gradient, see bwdApply.
extern "C" __global__ void bn_nhwc_bwd_apply(const S* dy, const S* x, S* dx, i64 M, int C, const float* mean,
					     const float* inv, const float* scale, const float* coef, const S* y,
					     S* dr) {
	bwdApply<1>(dy, x, dx, M, C, mean, inv, scale, coef, y, dr);
}
extern "C" __global__ void bn_nhwc_bwd_apply2(const S* dy, const S* x, S* dx, i64 M, int C, const float* mean,
					      const float* inv, const float* scale, const float* coef, const S* y,
					      S* dr) {
	bwdApply<2>(dy, x, dx, M, C, mean, inv, scale, coef, y, dr);
}

#endif

#endif
