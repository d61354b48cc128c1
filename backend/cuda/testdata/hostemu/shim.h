// shim.h lets g++ compile vram's kernels (common.cuh followed by a module
// such as norm.cu or optim.cu) for the host, so that TestKernelsOnHost can
// run their float32 arithmetic without a GPU: launch runs a grid's blocks
// one after another on as many OS threads as a block has, which meet at a
// barrier for __syncthreads; __shared__ arrays are static, which is
// right while one block runs at a time. The CUDA intrinsics the kernels
// call are defined with their float32 and float64 meaning. Inline PTX (the
// float16 conversions) is not available, so only float32 and float64
// modules build.
#include <cmath>
#include <cstring>
#include <cstdio>
#include <cstdlib>
#include <algorithm>
struct D3 { unsigned x, y, z; };
static D3 blockIdx, gridDim, blockDim;
static thread_local D3 threadIdx;
#include <barrier>
#include <thread>
#include <vector>
#include <functional>
static std::barrier<>* g_bar;
#define __device__
#define __global__
#define __host__
#define __forceinline__ inline
#define __shared__ static
#define __syncthreads() g_bar->arrive_and_wait()
#define __restrict__
static inline float __uint_as_float(unsigned u) { float f; memcpy(&f, &u, 4); return f; }
static inline unsigned __float_as_uint(float f) { unsigned u; memcpy(&u, &f, 4); return u; }
static inline double __longlong_as_double(long long u) { double f; memcpy(&f, &u, 8); return f; }
static inline long long __double_as_longlong(double f) { long long u; memcpy(&u, &f, 8); return u; }
static inline float __fadd_rn(float a, float b) { return a + b; }
static inline double __dadd_rn(double a, double b) { return a + b; }
static inline float __fmul_rn(float a, float b) { return a * b; }
static inline double __dmul_rn(double a, double b) { return a * b; }
static inline float __fdiv_rn(float a, float b) { return a / b; }
static inline double __ddiv_rn(double a, double b) { return a / b; }
static inline float __fsqrt_rn(float a) { return sqrtf(a); }
static inline double __dsqrt_rn(double a) { return sqrt(a); }
using std::max; using std::min;
static inline float __double2float_rz(double d) { return (float)d; }
static inline float __int_as_float(int u) { float f; memcpy(&f, &u, 4); return f; }
static inline unsigned long long atomicCAS(unsigned long long* p, unsigned long long c, unsigned long long v) { unsigned long long o = *p; if (o == c) *p = v; return o; }
static inline long long atomicCAS(long long* p, long long c, long long v) { long long o = *p; if (o == c) *p = v; return o; }
struct float2 { float x, y; };
struct uint2 { unsigned x, y; };
struct uint4 { unsigned x, y, z, w; };
static inline float2 make_float2(float x, float y) { return float2{x, y}; }

static void launch(D3 grid, D3 block, std::function<void()> fn) {
	gridDim = grid; blockDim = block;
	const int nt = block.x * block.y;
	const unsigned nb = grid.x * grid.y;
	if (nb == 0 || nt == 0) return;
	// One OS thread per thread of a block, which runs the blocks one after
	// another: all meet at step between blocks, whose completion moves
	// blockIdx on (bx fastest), so that a grid of many blocks costs no
	// more threads than one.
	blockIdx = D3{0, 0, 0};
	std::barrier<> bar(nt);
	g_bar = &bar;
	unsigned b = 0;
	auto next = [&]() noexcept { b++; blockIdx = D3{b % grid.x, b / grid.x, 0}; };
	std::barrier<decltype(next)> step(nt, next);
	std::vector<std::thread> ts;
	for (unsigned ty = 0; ty < block.y; ty++)
		for (unsigned tx = 0; tx < block.x; tx++)
			ts.emplace_back([=, &step] {
				threadIdx = D3{tx, ty, 0};
				for (unsigned k = 0; k < nb; k++) {
					fn();
					step.arrive_and_wait();
				}
			});
	for (auto& t : ts) t.join();
}
