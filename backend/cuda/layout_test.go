package cuda

import (
	"fmt"
	"slices"
	"testing"

	"github.com/vramgo/vram/backend"
)

// clStrides returns the channels-last strides of a 4-D shape.
func clStrides(s []int) []int { return []int{s[2] * s[3] * s[1], 1, s[3] * s[1], s[1]} }

// TestCoalesce checks the dimension ordering and merging of elementwise
// launches: operands that share one dense layout, whatever its order,
// become one dimension of stride 1 (the contiguous kernel); a broadcast
// per-channel vector against channels-last tensors becomes a row
// broadcast; mixed layouts follow the destination; a destination with a
// zero stride keeps the logical order.
func TestCoalesce(t *testing.T) {
	sh := []int{4, 64, 7, 5}
	cl, rm := clStrides(sh), backend.ContiguousStrides(sh)
	n := 4 * 64 * 7 * 5
	cases := []struct {
		name    string
		shape   []int
		strides [][]int
		wantS   []int
		wantSt  [][]int
	}{
		{"row-major", sh, [][]int{rm, rm}, []int{n}, [][]int{{1}, {1}}},
		{"channels-last, all three", sh, [][]int{cl, cl, cl}, []int{n}, [][]int{{1}, {1}, {1}}},
		{"channels-last, size-1 dims", []int{4, 64, 1, 1}, [][]int{{64, 1, 64, 64}, {64, 1, 64, 64}}, []int{4 * 64}, [][]int{{1}, {1}}},
		{"channels-last with a channel vector", sh, [][]int{cl, cl, {0, 1, 0, 0}},
			[]int{4 * 7 * 5, 64}, [][]int{{64, 1}, {64, 1}, {0, 1}}},
		{"channels-last from row-major", sh, [][]int{cl, rm},
			[]int{4, 7 * 5, 64}, [][]int{{7 * 5 * 64, 64, 1}, {64 * 7 * 5, 1, 7 * 5}}},
		{"row-major from channels-last", sh, [][]int{rm, cl},
			[]int{4, 64, 7 * 5}, [][]int{{64 * 7 * 5, 7 * 5, 1}, {7 * 5 * 64, 1, 64}}},
		{"transposed destination", []int{3, 5}, [][]int{{1, 3}, {1, 3}}, []int{15}, [][]int{{1}, {1}}},
		{"negative strides keep their sign", []int{3, 5}, [][]int{{1, -3}, {5, 1}},
			[]int{5, 3}, [][]int{{-3, 1}, {1, 5}}},
		{"zero-stride destination keeps the logical order", []int{6, 8}, [][]int{{1, 0}, {8, 1}},
			[]int{6, 8}, [][]int{{1, 0}, {8, 1}}},
		{"ties broken by the next operand", []int{2, 3}, [][]int{{1, 1}, {1, 2}},
			[]int{3, 2}, [][]int{{1, 1}, {2, 1}}},
		{"empty", []int{}, [][]int{{}, {}}, []int{}, [][]int{{}, {}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := make([][]int, len(c.strides))
			for k := range c.strides {
				in[k] = slices.Clone(c.strides[k])
			}
			ms, mst := coalesce(c.shape, in)
			if !slices.Equal(ms, c.wantS) {
				t.Fatalf("shape %v, want %v (strides %v)", ms, c.wantS, mst)
			}
			for k := range mst {
				if !slices.Equal(mst[k], c.wantSt[k]) {
					t.Fatalf("operand %d: strides %v, want %v", k, mst[k], c.wantSt[k])
				}
			}
			for k := range in {
				if !slices.Equal(in[k], c.strides[k]) {
					t.Fatalf("operand %d's strides changed to %v", k, in[k])
				}
			}
		})
	}
}

// TestCompareChannelsLast checks the elementwise kernels on channels-last
// (NHWC) operands against the CPU: unary, binary (with both inputs
// channels-last, with a broadcast per-channel vector, and with one input
// row-major), scalar, where, and copies that cast or change the layout,
// on shapes large enough to span several passes of the grid and on odd
// ones that defeat 4-wide vector accesses.
func TestCompareChannelsLast(t *testing.T) {
	p := newPair(t)
	for _, dt := range []backend.DType{backend.Float32, backend.BFloat16} {
		for _, sh := range [][]int{{8, 64, 28, 28}, {3, 5, 7, 9}, {2, 256, 1, 1}} {
			n := backend.NumElements(sh)
			r, at := tol(dt)
			x := p.place(dt, sh, layChannelsLast, p.random(dt, n, -3, 3), 0)
			y := p.place(dt, sh, layChannelsLast, p.random(dt, n, -3, 3), 0)
			yr := p.place(dt, sh, layContig, p.random(dt, n, -3, 3), 0)
			vec := p.place(dt, []int{sh[1]}, layContig, p.random(dt, sh[1], -3, 3), 0)
			chan4 := func(v backend.View) backend.View {
				v.Shape, v.Strides = slices.Clone(sh), []int{0, 1, 0, 0}
				return v
			}
			cv := twin{g: chan4(vec.g), c: chan4(vec.c)}
			for _, op := range []backend.UnaryOp{backend.Relu, backend.Neg, backend.Exp} {
				name := fmt.Sprintf("unary %s/%s/%v", op, dt, sh)
				out := p.output(dt, sh, layChannelsLast)
				if p.run(name, func(dev backend.Device, s int) error {
					return dev.Unary(dev.DefaultStream(), op, pick(out, s), pick(x, s), 0)
				}) {
					p.compare(name, out, 4*r, 4*at, nil)
				}
			}
			for _, c := range []struct {
				what string
				b    twin
			}{{"channels-last", y}, {"channel vector", cv}, {"row-major", yr}} {
				for _, op := range []backend.BinaryOp{backend.Add, backend.Mul, backend.ReluBackward, backend.AddRelu} {
					name := fmt.Sprintf("binary %s/%s/%v/%s", op, dt, sh, c.what)
					out := p.output(dt, sh, layChannelsLast)
					if p.run(name, func(dev backend.Device, s int) error {
						return dev.Binary(dev.DefaultStream(), op, pick(out, s), pick(x, s), pick(c.b, s))
					}) {
						p.compare(name, out, 4*r, 4*at, nil)
					}
				}
			}
			name := fmt.Sprintf("scalar/%s/%v", dt, sh)
			out := p.output(dt, sh, layChannelsLast)
			if p.run(name, func(dev backend.Device, s int) error {
				return dev.Scalar(dev.DefaultStream(), backend.Mul, pick(out, s), pick(x, s), 0.75, false)
			}) {
				p.compare(name, out, 4*r, 4*at, nil)
			}
			cond := p.place(backend.Bool, sh, layChannelsLast, p.random(backend.Bool, n, 0, 1), 0)
			name = fmt.Sprintf("where/%s/%v", dt, sh)
			out = p.output(dt, sh, layChannelsLast)
			if p.run(name, func(dev backend.Device, s int) error {
				return dev.Where(dev.DefaultStream(), pick(out, s), pick(cond, s), pick(x, s), pick(y, s))
			}) {
				p.compare(name, out, 0, 0, nil)
			}
			for _, c := range []struct {
				what string
				to   backend.DType
				from twin
				l    lay
			}{
				{"cast, channels-last", backend.Float16, x, layChannelsLast},
				{"to row-major", dt, x, layContig},
				{"from row-major", dt, yr, layChannelsLast},
				{"cast to float32, channels-last", backend.Float32, y, layChannelsLast},
			} {
				name := fmt.Sprintf("copy %s/%s->%s/%v", c.what, dt, c.to, sh)
				out := p.output(c.to, sh, c.l)
				if p.run(name, func(dev backend.Device, s int) error {
					return dev.Copy(dev.DefaultStream(), pick(out, s), pick(c.from, s))
				}) {
					r, at := tol(c.to)
					p.compare(name, out, r, at, nil)
				}
			}
		}
	}
}
