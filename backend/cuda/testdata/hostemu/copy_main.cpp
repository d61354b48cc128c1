// copy_main.cpp runs copy.cu's cp_<dst>_multi on the host (shim.h) for the
// module's source dtype SD and destination CP_DST (float32 to bfloat16, or
// back): up to CP_MAX pairs a launch, sizes that end mid-tile, pointers off
// the four-element alignment, against the one-pair conversion cp_<dst>_c.
// It prints PASS or FAIL.
#include <random>
#include <cstdint>
typedef DT<SD>::S Src;
typedef DT<CP_DST>::S Dst;
static int run(int nt, bool misaligned) {
	std::mt19937 rng(nt);
	std::normal_distribution<float> nd;
	std::vector<std::vector<Src>> a(16);
	std::vector<std::vector<Dst>> o(16), want(16);
	std::vector<i64> n(16, 0);
	const int sizes[] = {1, 3, 255, 256, 257, 1000, 4, 513, 77, 256 * 3, 2, 5, 600, 31, 64, 129};
	i64 blocks = 0;
	for (int t = 0; t < nt; t++) {
		n[t] = sizes[t];
		const int skip = misaligned && t % 2 ? 1 : 0;
		a[t].resize(n[t] + 1);
		o[t].assign(n[t] + 1, 0);
		want[t].assign(n[t] + 1, 0);
		for (auto& v : a[t]) {
			float f = nd(rng) * 100;
			Src s;
			if constexpr (sizeof(Src) == 4) s = f; else s = f2bf(f);
			v = s;
		}
		launch(D3{1, 1, 1}, D3{64, 1, 1}, [&] { CP_ONE(want[t].data() + skip, a[t].data() + skip, n[t], 0); });
		blocks += (n[t] + CP_TILE - 1) / CP_TILE;
	}
	auto O = [&](int t) { return o[t].data() + (misaligned && t % 2 ? 1 : 0); };
	auto A = [&](int t) { return (const Src*)a[t].data() + (misaligned && t % 2 ? 1 : 0); };
	launch(D3{(unsigned)blocks, 1, 1}, D3{64, 1, 1}, [&] {
		CP_MULTI(nt, O(0), A(0), n[0], O(1), A(1), n[1], O(2), A(2), n[2], O(3), A(3), n[3], O(4), A(4), n[4],
			 O(5), A(5), n[5], O(6), A(6), n[6], O(7), A(7), n[7], O(8), A(8), n[8], O(9), A(9), n[9],
			 O(10), A(10), n[10], O(11), A(11), n[11], O(12), A(12), n[12], O(13), A(13), n[13], O(14), A(14), n[14],
			 O(15), A(15), n[15]);
	});
	int bad = 0;
	for (int t = 0; t < nt; t++)
		if (memcmp(o[t].data(), want[t].data(), o[t].size() * sizeof(Dst)) != 0) bad++;
	printf("nt=%d misaligned=%d: %d pairs wrong\n", nt, misaligned, bad);
	return bad ? 1 : 0;
}
int main() {
	int bad = 0;
	for (int nt : {1, 2, 7, 16})
		for (bool m : {false, true}) bad += run(nt, m);
	printf(bad ? "FAIL\n" : "PASS\n");
	return bad;
}
