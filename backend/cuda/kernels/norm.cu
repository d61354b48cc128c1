// norm.cu: batch normalization of channels-last (NHWC) tensors, whose
// values of one channel lie C elements apart. The tensor is read as M rows
// (M = N·H·W) of C channels. Blocks are NB_TX channels wide and NB_TY rows
// tall: the threads of a warp read NB_TX neighbouring channels of one row,
// so every load is coalesced, and each thread walks its channel down the
// rows with a stride of gridDim.y·NB_TY. Statistics are reduced in two
// steps without atomics, so the results do not depend on scheduling: each
// block row writes its partial sums to a buffer of 2·gridDim.y·C floats,
// and a finishing kernel adds them per channel in float64.
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

// bn_nhwc_stats: part[y·C + c] = Σ (x − s), part[(gy + y)·C + c] = Σ (x − s)²
// over the rows of block row y, with s = x[0, c].
extern "C" __global__ void bn_nhwc_stats(const DT<VD>::S* x, i64 M, int C, float* part) {
	__shared__ float sa[NB_TY][NB_TX + 1], sb[NB_TY][NB_TX + 1];
	const int tx = threadIdx.x, ty = threadIdx.y;
	const int c = blockIdx.x * NB_TX + tx;
	float a = 0, b = 0;
	if (c < C) {
		const float s = ldc<VD>(x[c]);
		for (i64 r = (i64)blockIdx.y * NB_TY + ty; r < M; r += (i64)gridDim.y * NB_TY) {
			float v = ldc<VD>(x[r * C + c]) - s;
			a += v;
			b = fmaf(v, v, b);
		}
	}
	sa[ty][tx] = a;
	sb[ty][tx] = b;
	__syncthreads();
	if (ty == 0 && c < C) {
		for (int k = 1; k < NB_TY; k++) {
			a += sa[k][tx];
			b += sb[k][tx];
		}
		part[(i64)blockIdx.y * C + c] = a;
		part[(i64)(gridDim.y + blockIdx.y) * C + c] = b;
	}
}

// bn_nhwc_finish: the mean and 1/sqrt(var + eps) of each channel from the
// gy block rows of partial sums; with run != 0, the running statistics
// move by momentum towards the batch's mean and unbiased variance.
extern "C" __global__ void bn_nhwc_finish(const DT<VD>::S* x, const float* part, int gy, int C, i64 M, double eps,
					  double momentum, int run, float* runMean, float* runVar, float* saveMean,
					  float* saveInvStd) {
	const int c = blockIdx.x * blockDim.x + threadIdx.x;
	if (c >= C) return;
	double a = 0, b = 0;
	for (int y = 0; y < gy; y++) {
		a += part[(i64)y * C + c];
		b += part[(i64)(gy + y) * C + c];
	}
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

// bn_nhwc_apply: y = (x − mean)·k·scale + bias, with k = inv[c], or with
// k = 1/sqrt(inv[c] + eps) when fromVar != 0 (inference: inv holds the
// running variance).
extern "C" __global__ void bn_nhwc_apply(const DT<VD>::S* x, DT<VD>::S* y, i64 M, int C, const float* mean,
					 const float* inv, const float* scale, const float* bias, int fromVar, double eps) {
	const int c = blockIdx.x * NB_TX + threadIdx.x;
	if (c >= C) return;
	const float k = fromVar ? (float)(1.0 / sqrt((double)inv[c] + eps)) : inv[c];
	const float g = k * scale[c];
	const float h = bias[c] - mean[c] * g;
	for (i64 r = (i64)blockIdx.y * NB_TY + threadIdx.y; r < M; r += (i64)gridDim.y * NB_TY) {
		const i64 i = r * C + c;
		y[i] = st<VD>(fmaf(ldc<VD>(x[i]), g, h));
	}
}

// bn_nhwc_bwd_stats: part[y·C + c] = Σ dy, part[(gy + y)·C + c] =
// Σ dy·(x − mean) over the rows of block row y.
extern "C" __global__ void bn_nhwc_bwd_stats(const DT<VD>::S* dy, const DT<VD>::S* x, i64 M, int C,
					     const float* mean, float* part) {
	__shared__ float sa[NB_TY][NB_TX + 1], sb[NB_TY][NB_TX + 1];
	const int tx = threadIdx.x, ty = threadIdx.y;
	const int c = blockIdx.x * NB_TX + tx;
	float a = 0, b = 0;
	if (c < C) {
		const float mu = mean[c];
		for (i64 r = (i64)blockIdx.y * NB_TY + ty; r < M; r += (i64)gridDim.y * NB_TY) {
			const i64 i = r * C + c;
			const float g = ldc<VD>(dy[i]);
			a += g;
			b = fmaf(g, ldc<VD>(x[i]) - mu, b);
		}
	}
	sa[ty][tx] = a;
	sb[ty][tx] = b;
	__syncthreads();
	if (ty == 0 && c < C) {
		for (int k = 1; k < NB_TY; k++) {
			a += sa[k][tx];
			b += sb[k][tx];
		}
		part[(i64)blockIdx.y * C + c] = a;
		part[(i64)(gridDim.y + blockIdx.y) * C + c] = b;
	}
}

// bn_nhwc_bwd_finish: dbias = Σ dy, dscale = Σ dy·(x − mean)·inv, and the
// two coefficients of the input gradient: coef[c] = Σ dy / M and
// coef[C + c] = Σ dy·(x − mean) / M · inv².
extern "C" __global__ void bn_nhwc_bwd_finish(const float* part, int gy, int C, i64 M, const float* inv,
					      float* dscale, float* dbias, float* coef) {
	const int c = blockIdx.x * blockDim.x + threadIdx.x;
	if (c >= C) return;
	double a = 0, b = 0;
	for (int y = 0; y < gy; y++) {
		a += part[(i64)y * C + c];
		b += part[(i64)(gy + y) * C + c];
	}
	const double k = inv[c];
	dbias[c] = (float)a;
	dscale[c] = (float)(b * k);
	coef[c] = (float)(a / (double)M);
	coef[C + c] = (float)(b / (double)M * k * k);
}

// bn_nhwc_bwd_apply: dx = scale·inv·(dy − coef[c] − (x − mean)·coef[C + c]).
// dx may be dy: each element is read and written by one thread.
extern "C" __global__ void bn_nhwc_bwd_apply(const DT<VD>::S* dy, const DT<VD>::S* x, DT<VD>::S* dx, i64 M, int C,
					     const float* mean, const float* inv, const float* scale, const float* coef) {
	const int c = blockIdx.x * NB_TX + threadIdx.x;
	if (c >= C) return;
	const float k = scale[c] * inv[c], mu = mean[c], m = coef[c], q = coef[C + c];
	for (i64 r = (i64)blockIdx.y * NB_TY + threadIdx.y; r < M; r += (i64)gridDim.y * NB_TY) {
		const i64 i = r * C + c;
		const float g = ldc<VD>(dy[i]);
		dx[i] = st<VD>(k * (g - m - (ldc<VD>(x[i]) - mu) * q));
	}
}

#endif

#endif
