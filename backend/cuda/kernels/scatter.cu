// scatter.cu: scatter-add on the module's dtype VD (a -D option), with
// atomic additions (bool: atomic or; int8 and the 16-bit floats: a
// compare-and-swap loop). The kernel does nothing once the
// error words hold an error: the index check that runs before it found an
// index out of range, and dst is left as it was.

__device__ __forceinline__ void atomic_add(float* p, float v) { atomicAdd(p, v); }
__device__ __forceinline__ void atomic_add(int* p, int v) { atomicAdd(p, v); }
__device__ __forceinline__ void atomic_add(i64* p, i64 v) { atomicAdd((u64*)p, (u64)v); }
__device__ __forceinline__ void atomic_add(double* p, double v) {
#if __CUDA_ARCH__ >= 600
	atomicAdd(p, v);
#else
	u64* q = (u64*)p;
	u64 old = *q, assumed;
	do {
		assumed = old;
		old = atomicCAS(q, assumed, (u64)__double_as_longlong(__longlong_as_double((i64)assumed) + v));
	} while (assumed != old);
#endif
}

// 16-bit floats and bool: a compare-and-swap loop on the aligned 32-bit
// word that holds the element.
template <int D> __device__ __forceinline__ void atomic_add16(unsigned short* p, unsigned short v) {
	unsigned* w = (unsigned*)((u64)p & ~(u64)3);
	unsigned shift = ((u64)p & 2) ? 16 : 0;
	unsigned old = *w, assumed;
	do {
		assumed = old;
		unsigned short cur = (unsigned short)(assumed >> shift);
		float sum = ldc<D>(cur) + ldc<D>(v);
		unsigned short nv = st<D>(sum);
		unsigned next = (assumed & ~(0xffffu << shift)) | ((unsigned)nv << shift);
		old = atomicCAS(w, assumed, next);
	} while (assumed != old);
}
__device__ __forceinline__ void atomic_or8(unsigned char* p, unsigned char v) {
	if (!v) return;
	unsigned* w = (unsigned*)((u64)p & ~(u64)3);
	unsigned shift = ((u64)p & 3) * 8;
	atomicOr(w, 1u << shift);
}

// int8: a compare-and-swap loop on the aligned 32-bit word that holds the
// byte, the sum wrapping as the CPU backend's does.
__device__ __forceinline__ void atomic_add_i8(signed char* p, signed char v) {
	unsigned* w = (unsigned*)((u64)p & ~(u64)3);
	unsigned shift = ((u64)p & 3) * 8;
	unsigned old = *w, assumed;
	do {
		assumed = old;
		unsigned char cur = (unsigned char)(assumed >> shift);
		unsigned char nv = (unsigned char)(cur + (unsigned char)v);
		unsigned next = (assumed & ~(0xffu << shift)) | ((unsigned)nv << shift);
		old = atomicCAS(w, assumed, next);
	} while (assumed != old);
}

typedef DT<VD>::S S;

__device__ __forceinline__ void add_to(S* p, S v) {
#if VD == DT_F16 || VD == DT_BF16
	atomic_add16<VD>(p, v);
#elif VD == DT_BOOL
	atomic_or8(p, v);
#elif VD == DT_I8
	atomic_add_i8(p, v);
#else
	atomic_add(p, v);
#endif
}

extern "C" __global__ void scatter_add(S* dst, const i64* index, const S* src, const i64* err, i64 ast, i64 bound,
					i64 n, IDX_PARAMS3) {
	if (*(volatile const i64*)err != 0) return;
	IDX_BUILD3;
	for (i64 i = GTID; i < n; i += GNTH) {
		i64 off[3];
		offsets<3>(ix, i, off);
		i64 k = index[off[1]];
		if (k < 0 || k >= bound) continue;
		add_to(dst + off[0] + k * ast, src[off[2]]);
	}
}
