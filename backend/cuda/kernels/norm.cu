// norm.cu: batch normalization of channels-last (NHWC) tensors, whose
// values of one channel lie C elements apart. The tensor is read as M rows
// (M = N·H·W) of C channels. Blocks are NB_TX threads wide and NB_TY rows
// tall, and each thread takes V neighbouring channels (V = 2 for the
// kernels named …2, with one 4- or 8-byte load; V = 1 otherwise): the
// threads of a warp read NB_TX·V neighbouring channels of one row, so
// every load is coalesced, and each thread walks its channels down the
// rows with a stride of gridDim.y·NB_TY. Statistics are reduced in two
// steps, so the results do not depend on scheduling: each block row
// writes its partial sums to a buffer of 2·gridDim.y·C floats, and the
// last block of each column of blocks to finish (found with one counter a
// column, the only atomic) adds the column's partial sums per channel in
// float64, always in the same order, and finishes the statistics. The
// counters are the stream's own (4 bytes a column, zero between kernels:
// the last block puts its column's back to zero), so one launch does what
// took a reducing and a finishing kernel.
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

// lastOfColumn reports to every thread of the block whether it is the
// last block of its column (blockIdx.x) to have written its partial sums,
// with count[blockIdx.x] counting them; the last block puts the counter
// back to zero for the stream's next kernel. The partial sums the other
// blocks wrote are visible to the last one: each block fences its writes
// before it counts itself.
__device__ __forceinline__ bool lastOfColumn(unsigned* count) {
	__shared__ int last;
	__threadfence();
	__syncthreads();
	if (threadIdx.x == 0 && threadIdx.y == 0) {
		last = atomicAdd(&count[blockIdx.x], 1u) == gridDim.y - 1;
		if (last) count[blockIdx.x] = 0;
	}
	__syncthreads();
	if (last) __threadfence();
	return last;
}

// columnSums adds, in the column's last block, the gridDim.y partial sums
// of the thread's channels c0 … c0+V−1 in float64: thread row ty takes
// every NB_TY-th block row, in four running sums that keep four loads in
// flight (a column can have a thousand block rows), then thread row 0
// adds the rows' sums in order, so it alone gets the totals. The order
// never changes, nor does the result.
template <int V>
__device__ __forceinline__ void columnSums(const float* part, int c0, int C, double* a, double* b) {
	__shared__ double fa[NB_TY][NB_TX * V + 1], fb[NB_TY][NB_TX * V + 1];
	const int tx = threadIdx.x, ty = threadIdx.y, gy = gridDim.y;
	double pa[4][V], pb[4][V];
	for (int u = 0; u < 4; u++)
		for (int j = 0; j < V; j++) pa[u][j] = pb[u][j] = 0;
	if (c0 < C) {
		int k = ty;
		for (; k + 3 * NB_TY < gy; k += 4 * NB_TY) {
#pragma unroll
			for (int u = 0; u < 4; u++)
				for (int j = 0; j < V; j++) {
					pa[u][j] += __ldcg(part + (i64)(k + u * NB_TY) * C + c0 + j);
					pb[u][j] += __ldcg(part + (i64)(gy + k + u * NB_TY) * C + c0 + j);
				}
		}
		for (; k < gy; k += NB_TY)
			for (int j = 0; j < V; j++) {
				pa[0][j] += __ldcg(part + (i64)k * C + c0 + j);
				pb[0][j] += __ldcg(part + (i64)(gy + k) * C + c0 + j);
			}
	}
	for (int j = 0; j < V; j++) {
		a[j] = (pa[0][j] + pa[1][j]) + (pa[2][j] + pa[3][j]);
		b[j] = (pb[0][j] + pb[1][j]) + (pb[2][j] + pb[3][j]);
		fa[ty][tx * V + j] = a[j];
		fb[ty][tx * V + j] = b[j];
	}
	__syncthreads();
	if (ty == 0)
		for (int k = 1; k < NB_TY; k++)
			for (int j = 0; j < V; j++) {
				a[j] += fa[k][tx * V + j];
				b[j] += fb[k][tx * V + j];
			}
}

// stats: Σ (x − s) and Σ (x − s)² per channel over the block's rows, with
// s = x[0, c], then, in the column's last block, the mean and 1/sqrt(var +
// eps) of each channel; with run != 0, the running statistics move by
// momentum towards the batch's mean and unbiased variance.
template <int V>
__device__ __forceinline__ void stats(const S* x, i64 M, int C, float* part, unsigned* count, double eps,
				      double momentum, int run, float* runMean, float* runVar, float* saveMean,
				      float* saveInvStd) {
	const int c0 = (blockIdx.x * NB_TX + threadIdx.x) * V;
	float a[V], b[V], s[V], v[V];
	for (int j = 0; j < V; j++) a[j] = b[j] = s[j] = 0;
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
	if (!lastOfColumn(count)) return;
	double sa[V], sb[V];
	columnSums<V>(part, c0, C, sa, sb);
	if (threadIdx.y != 0 || c0 >= C) return;
	for (int j = 0; j < V; j++) {
		const int c = c0 + j;
		const double m1 = sa[j] / (double)M;
		double var = sb[j] / (double)M - m1 * m1;
		if (var < 0) var = 0;
		const double mean = (double)s[j] + m1;
		saveMean[c] = (float)mean;
		saveInvStd[c] = (float)(1.0 / sqrt(var + eps));
		if (run) {
			runMean[c] = (float)((1 - momentum) * (double)runMean[c] + momentum * mean);
			runVar[c] = (float)((1 - momentum) * (double)runVar[c] + momentum * var * (double)M / (double)(M - 1));
		}
	}
}

// bn_nhwc_stats: the batch's statistics, see stats. part holds
// 2·gridDim.y·C floats: Σ (x − s) of block row y at part[y·C + c],
// Σ (x − s)² at part[(gridDim.y + y)·C + c]; count holds gridDim.x zeros.
extern "C" __global__ void bn_nhwc_stats(const S* x, i64 M, int C, float* part, unsigned* count, double eps,
					 double momentum, int run, float* runMean, float* runVar, float* saveMean,
					 float* saveInvStd) {
	stats<1>(x, M, C, part, count, eps, momentum, run, runMean, runVar, saveMean, saveInvStd);
}
extern "C" __global__ void bn_nhwc_stats2(const S* x, i64 M, int C, float* part, unsigned* count, double eps,
					  double momentum, int run, float* runMean, float* runVar, float* saveMean,
					  float* saveInvStd) {
	stats<2>(x, M, C, part, count, eps, momentum, run, runMean, runVar, saveMean, saveInvStd);
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

// bwdStats: Σ dy and Σ dy·(x − mean) per channel over the block's rows,
// dy masked by the ReLU output y when y is not null; then, in the column's
// last block, dbias = Σ dy, dscale = Σ dy·(x − mean)·inv, and the two
// coefficients of the input gradient: coef[c] = Σ dy / M and coef[C + c] =
// Σ dy·(x − mean) / M · inv².
template <int V>
__device__ __forceinline__ void bwdStats(const S* dy, const S* x, i64 M, int C, const float* mean, float* part,
					 const S* y, unsigned* count, const float* inv, float* dscale, float* dbias,
					 float* coef) {
	const int c0 = (blockIdx.x * NB_TX + threadIdx.x) * V;
	float a[V], b[V], mu[V], g[V], v[V];
	for (int j = 0; j < V; j++) a[j] = b[j] = 0;
	if (c0 < C) {
		for (int j = 0; j < V; j++) mu[j] = mean[c0 + j];
		for (i64 r = (i64)blockIdx.y * NB_TY + threadIdx.y; r < M; r += (i64)gridDim.y * NB_TY) {
			const i64 i = r * C + c0;
			ldv<V>(dy + i, g);
			masked<V>(y, i, g);
			ldv<V>(x + i, v);
			for (int j = 0; j < V; j++) {
				a[j] += g[j];
				b[j] = fmaf(g[j], v[j] - mu[j], b[j]);
			}
		}
	}
	partials<V>(a, b, c0, C, part);
	if (!lastOfColumn(count)) return;
	double sa[V], sb[V];
	columnSums<V>(part, c0, C, sa, sb);
	if (threadIdx.y != 0 || c0 >= C) return;
	for (int j = 0; j < V; j++) {
		const int c = c0 + j;
		const double k = inv[c];
		dbias[c] = (float)sa[j];
		dscale[c] = (float)(sb[j] * k);
		coef[c] = (float)(sa[j] / (double)M);
		coef[C + c] = (float)(sb[j] / (double)M * k * k);
	}
}

// bn_nhwc_bwd_stats: the gradients of scale and bias and the input
// gradient's coefficients, see bwdStats; part and count as
// bn_nhwc_stats's.
extern "C" __global__ void bn_nhwc_bwd_stats(const S* dy, const S* x, i64 M, int C, const float* mean, float* part,
					     const S* y, unsigned* count, const float* inv, float* dscale,
					     float* dbias, float* coef) {
	bwdStats<1>(dy, x, M, C, mean, part, y, count, inv, dscale, dbias, coef);
}
extern "C" __global__ void bn_nhwc_bwd_stats2(const S* dy, const S* x, i64 M, int C, const float* mean,
					      float* part, const S* y, unsigned* count, const float* inv,
					      float* dscale, float* dbias, float* coef) {
	bwdStats<2>(dy, x, M, C, mean, part, y, count, inv, dscale, dbias, coef);
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
