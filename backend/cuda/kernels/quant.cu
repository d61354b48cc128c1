// quant.cu: int8 weight-only quantization, into the module's float dtype VD
// (a -D option). dequant_i8 expands an int8 weight wq [rows, cols] with one
// scale per row into dst [rows, cols] of dtype VD, both contiguous:
//
//	dst[r, c] = wq[r, c]·scale[r]
//
// computed in the compute type (float32, float64 for float64) and rounded
// once to VD, as the CPU backend does. With vec (cols a multiple of 4, wq
// aligned to 4 bytes and dst to 4 elements) each thread moves 4 elements
// per access: one 32-bit load of weights, one vector store.

#if VD == DT_F32 || VD == DT_F64 || VD == DT_F16 || VD == DT_BF16
#if defined(K_ALL) || defined(K_dequant)

extern "C" __global__ void dequant_i8(DT<VD>::S* dst, const signed char* wq, const DT<VD>::S* scale, i64 rows,
				      i64 cols, int vec) {
	typedef DT<VD>::S S;
	typedef DT<VD>::C C;
	if (vec) {
		i64 cv = cols >> 2, nv = rows * cv;
		const Vec<4, signed char>* w4 = (const Vec<4, signed char>*)wq;
		Vec<4, S>* d4 = (Vec<4, S>*)dst;
		for (i64 i = GTID; i < nv; i += GNTH) {
			C s = ldc<VD>(scale[i / cv]);
			Vec<4, signed char> w = w4[i];
			Vec<4, S> y;
#pragma unroll
			for (int j = 0; j < 4; j++) y.v[j] = st<VD>((C)w.v[j] * s);
			d4[i] = y;
		}
		return;
	}
	i64 n = rows * cols;
	for (i64 i = GTID; i < n; i += GNTH) dst[i] = st<VD>((C)wq[i] * ldc<VD>(scale[i / cols]));
}

#endif
#endif
