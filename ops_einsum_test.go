package vram

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// refEinsum evaluates an explicit equation without "..." by visiting
// every assignment of its letters; sizes of 1 broadcast.
func refEinsum(eq string, shapes [][]int, data [][]float64) ([]int, []float64) {
	eq = strings.ReplaceAll(eq, " ", "")
	lhs, out, _ := strings.Cut(eq, "->")
	terms := strings.Split(lhs, ",")
	size := map[byte]int{}
	var letters []byte
	for k, term := range terms {
		for i := range len(term) {
			c := term[i]
			if _, ok := size[c]; !ok {
				letters = append(letters, c)
			}
			size[c] = max(size[c], shapes[k][i])
		}
	}
	oshape := make([]int, len(out))
	n := 1
	for i := range len(out) {
		oshape[i] = size[out[i]]
		n *= oshape[i]
	}
	res := make([]float64, n)
	val := map[byte]int{}
	var visit func(li int)
	visit = func(li int) {
		if li == len(letters) {
			p := 1.0
			for k, term := range terms {
				off := 0
				for i := range len(term) {
					v := val[term[i]]
					if shapes[k][i] == 1 {
						v = 0
					}
					off = off*shapes[k][i] + v
				}
				p *= data[k][off]
			}
			off := 0
			for i := range len(out) {
				off = off*oshape[i] + val[out[i]]
			}
			res[off] += p
			return
		}
		for v := range size[letters[li]] {
			val[letters[li]] = v
			visit(li + 1)
		}
	}
	visit(0)
	return oshape, res
}

// TestEinsum compares Einsum with the reference on equations covering
// matrix products, batches, outer products, traces, diagonals, sums,
// broadcasting and scalars, on the CPU and a sim device.
func TestEinsum(t *testing.T) {
	cases := []struct {
		eq     string
		shapes [][]int
		ref    string // the explicit equation the reference evaluates
	}{
		{"ij,jk->ik", [][]int{{2, 3}, {3, 4}}, ""},
		{"ij,jk", [][]int{{2, 3}, {3, 4}}, "ij,jk->ik"},
		{"bij,bjk->bik", [][]int{{2, 2, 3}, {2, 3, 4}}, ""},
		{"i,j->ij", [][]int{{3}, {4}}, ""},
		{"i,i->", [][]int{{5}, {5}}, ""},
		{"ii->", [][]int{{3, 3}}, ""},
		{"ii->i", [][]int{{3, 3}}, ""},
		{"ii", [][]int{{3, 3}}, "ii->"},
		{"iji->j", [][]int{{2, 3, 2}}, ""},
		{"ij->ji", [][]int{{2, 3}}, ""},
		{"ba", [][]int{{2, 3}}, "ba->ab"},
		{"ij->", [][]int{{2, 3}}, ""},
		{"ij->j", [][]int{{2, 3}}, ""},
		{"ij, jk ,kl->il", [][]int{{2, 3}, {3, 4}, {4, 2}}, "ij,jk,kl->il"},
		{"ik,jk->ijk", [][]int{{2, 3}, {4, 3}}, ""},
		{"bn,anm,bm->ba", [][]int{{2, 3}, {4, 3, 5}, {2, 5}}, ""},
		{"ij,ij->ij", [][]int{{1, 3}, {2, 3}}, ""},
		{"Ab,bA->", [][]int{{2, 3}, {3, 2}}, ""},
		{"aB", [][]int{{2, 3}}, "aB->Ba"},
		{"i,->i", [][]int{{3}, {}}, ""},
		{"ij,jk->ik", [][]int{{2, 0}, {0, 4}}, ""},
	}
	for _, d := range orderDevices {
		for _, tc := range cases {
			t.Run(d.String()+"/"+tc.eq, func(t *testing.T) {
				ops := make([]*Tensor, len(tc.shapes))
				data := make([][]float64, len(tc.shapes))
				for k, s := range tc.shapes {
					n := 1
					for _, v := range s {
						n *= v
					}
					data[k] = make([]float64, n)
					for i := range data[k] {
						data[k][i] = float64((i*7+k*3)%11) - 5
					}
					ops[k] = FromSlice(data[k], s, d)
					defer ops[k].Release()
				}
				ref := tc.ref
				if ref == "" {
					ref = tc.eq
				}
				wshape, want := refEinsum(ref, tc.shapes, data)
				got := Einsum(tc.eq, ops...)
				defer got.Release()
				if !slices.Equal(got.Shape(), wshape) || !sameFloats(got.Float64s(), want, 1e-9) {
					t.Errorf("got %v %v, want %v %v", got.Shape(), got.Float64s(), wshape, want)
				}
			})
		}
	}
}

// TestEinsumEllipsis checks "..." broadcasting against the equivalent
// lettered equations.
func TestEinsumEllipsis(t *testing.T) {
	a := Randn(Shape{2, 3, 4, 5}, Float64)
	defer a.Release()
	b := Randn(Shape{3, 5, 6}, Float64)
	defer b.Release()
	c := Randn(Shape{4, 4}, Float64)
	defer c.Release()
	cases := []struct {
		name     string
		got, ref func() *Tensor
	}{
		{"batched matmul", func() *Tensor { return Einsum("...ij,...jk->...ik", a, b) }, func() *Tensor { return Einsum("xyij,yjk->xyik", a, b) }},
		{"implicit leads", func() *Tensor { return Einsum("...ij,...jk", a, b) }, func() *Tensor { return Einsum("xyij,yjk->xyik", a, b) }},
		{"middle", func() *Tensor { return Einsum("a...b->ba...", a) }, func() *Tensor { return Einsum("axyb->baxy", a) }},
		{"dropped sums", func() *Tensor { return Einsum("...ij->ij", a) }, func() *Tensor { return Einsum("xyij->ij", a) }},
		{"trace of batch", func() *Tensor { return Einsum("...ii->...", c) }, func() *Tensor { return Einsum("ii->", c) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g, r := tc.got(), tc.ref()
			defer g.Release()
			defer r.Release()
			if !slices.Equal(g.Shape(), r.Shape()) || !sameFloats(g.Float64s(), r.Float64s(), 1e-9) {
				t.Errorf("got %v, want %v", g.Shape(), r.Shape())
			}
		})
	}
}

// TestEinsumGradientAndDTypes checks gradients through diagonals and
// products, and integer operands.
func TestEinsumGradientAndDTypes(t *testing.T) {
	x := FromSlice([]float64{1, 2, 3, 4}, Shape{2, 2}, WithGrad())
	defer x.Release()
	v := FromSlice([]float64{5, 6}, Shape{2}, WithGrad())
	defer v.Release()
	y := Einsum("ii,i->", x, v) // 1*5 + 4*6
	defer y.Release()
	if y.Item() != 29 {
		t.Errorf("got %v, want 29", y.Item())
	}
	y.Backward()
	if g := x.Grad().Float64s(); !slices.Equal(g, []float64{5, 0, 0, 6}) {
		t.Errorf("x grad %v", g)
	}
	if g := v.Grad().Float64s(); !slices.Equal(g, []float64{1, 4}) {
		t.Errorf("v grad %v", g)
	}
	a := FromSlice([]int64{1, 2, 3, 4}, Shape{2, 2})
	defer a.Release()
	p := Einsum("ij,jk->ik", a, a)
	defer p.Release()
	if p.DType() != Int64 || !slices.Equal(p.Int64s(), []int64{7, 10, 15, 22}) {
		t.Errorf("int64 got %v", p)
	}
	for _, dev := range []Device{CPU, Sim(0)} {
		i32 := FromSlice([]int32{1, 2, 3, 4}, Shape{2, 2}, dev)
		i8 := FromSlice([]int32{100, 2, 3, 4}, Shape{2, 2}, dev, Int8)
		b := FromSlice([]bool{true, false, true, true}, Shape{2, 2}, dev)
		r0, r1 := i32.Select(0, 0), i32.Select(0, 1)
		b0, b1 := b.Select(0, 0), b.Select(0, 1)
		c0 := i8.Select(0, 0)
		cases := []struct {
			name string
			got  func() *Tensor
			dt   DType
			want []float64
		}{
			// A product of two keeps their dtype, as PyTorch's mul and bmm.
			{"int32 matmul", func() *Tensor { return Einsum("ij,jk->ik", i32, i32) }, Int32, []float64{7, 10, 15, 22}},
			{"int32 outer", func() *Tensor { return Einsum("i,j->ij", r0, r1) }, Int32, []float64{3, 4, 6, 8}},
			{"int32 elementwise", func() *Tensor { return Einsum("ij,ij->ij", i32, i32) }, Int32, []float64{1, 4, 9, 16}},
			{"int32 dot", func() *Tensor { return Einsum("ij,ij->", i32, i32) }, Int32, []float64{30}},
			// 100·100 + 2·2 = 10004, which int8 wraps to 20.
			{"int8 wraps", func() *Tensor { return Einsum("i,i->", c0, c0) }, Int8, []float64{20}},
			{"bool outer", func() *Tensor { return Einsum("i,j->ij", b0, b1) }, Bool, []float64{1, 1, 0, 0}},
			// A sum over one operand is PyTorch's sum: int64.
			{"int32 sum of one", func() *Tensor { return Einsum("ij->j", i32) }, Int64, []float64{4, 6}},
			{"int32 trace", func() *Tensor { return Einsum("ii", i32) }, Int64, []float64{5}},
			{"int32 transpose", func() *Tensor { return Einsum("ij->ji", i32) }, Int32, []float64{1, 3, 2, 4}},
			{"int32 summed before the product", func() *Tensor { return Einsum("ij,k->k", i32, r0) }, Int64, []float64{10, 20}},
			{"bool summed", func() *Tensor { return Einsum("ij,jk->ik", b, b) }, Int64, []float64{1, 0, 2, 1}},
		}
		for _, c := range cases {
			t.Run(dev.String()+"/"+c.name, func(t *testing.T) {
				got := c.got()
				defer got.Release()
				if got.DType() != c.dt || !slices.Equal(got.Float64s(), c.want) {
					t.Errorf("got %s %v, want %s %v", got.DType(), got.Float64s(), c.dt, c.want)
				}
			})
		}
	}
	h := FromSlice([]float32{1, 2}, Shape{2}, Float16)
	defer h.Release()
	hh := Einsum("i,i", h, h)
	defer hh.Release()
	if hh.DType() != Float16 || hh.Item() != 5 {
		t.Errorf("float16 got %v", hh)
	}
}

// TestEinsumErrors checks that each malformed equation panics with a
// message naming its problem.
func TestEinsumErrors(t *testing.T) {
	m := Ones(Shape{2, 3})
	defer m.Release()
	n := Ones(Shape{4, 3})
	defer n.Release()
	s := Ones(Shape{3, 3})
	defer s.Release()
	i32 := Ones(Shape{3, 2}, Int32)
	defer i32.Release()
	cases := []struct {
		eq   string
		ops  []*Tensor
		kind error
		says string
	}{
		{"ij,jk->ik", []*Tensor{m}, ErrArgument, "names 2 operand(s), got 1 tensor(s)"},
		{"ij->ik", []*Tensor{m}, ErrArgument, "does not appear"},
		{"ij->ii", []*Tensor{m}, ErrArgument, "more than once"},
		{"i1->i", []*Tensor{m}, ErrArgument, "invalid character '1'"},
		{"ié->i", []*Tensor{m}, ErrArgument, "invalid character 'é'"},
		{"iα->i", []*Tensor{m}, ErrArgument, "invalid character 'α'"},
		{"ij->i\xff", []*Tensor{m}, ErrArgument, "invalid byte 0xff, not UTF-8"},
		{"i.j->i", []*Tensor{m}, ErrArgument, "not part of"},
		{"...i...->i", []*Tensor{m}, ErrArgument, "more than once"},
		{"ij->i->j", []*Tensor{m}, ErrArgument, "more than one"},
		{"ijk->i", []*Tensor{m}, ErrShape, "name 3 dimensions, but the tensor has 2"},
		{"ij,jk->ik", []*Tensor{m, n}, ErrShape, "size 4"},
		{"ii->i", []*Tensor{m}, ErrShape, "size 3 in operand 0 but 2"},
		{"ij,jk->ik", []*Tensor{s, i32}, ErrDType, "one dtype"},
		{"", nil, ErrArgument, "at least one operand"},
	}
	for _, tc := range cases {
		t.Run(tc.eq, func(t *testing.T) {
			err := Catch(func() { Tidy(func() { Einsum(tc.eq, tc.ops...) }) })
			if !errors.Is(err, tc.kind) || !strings.Contains(err.Error(), tc.says) || !strings.Contains(err.Error(), "einsum") {
				t.Errorf("got %v, want %v saying %q", err, tc.kind, tc.says)
			}
		})
	}
}

// TestMeshgrid checks both indexings, gradients and errors.
func TestMeshgrid(t *testing.T) {
	x := FromSlice([]float64{1, 2, 3}, Shape{3}, WithGrad())
	defer x.Release()
	y := FromSlice([]float64{10, 20}, Shape{2})
	defer y.Release()
	for _, tc := range []struct {
		indexing string
		shape    Shape
		gx, gy   []float64
	}{
		{"ij", Shape{3, 2}, []float64{1, 1, 2, 2, 3, 3}, []float64{10, 20, 10, 20, 10, 20}},
		{"", Shape{3, 2}, []float64{1, 1, 2, 2, 3, 3}, []float64{10, 20, 10, 20, 10, 20}},
		{"xy", Shape{2, 3}, []float64{1, 2, 3, 1, 2, 3}, []float64{10, 10, 10, 20, 20, 20}},
	} {
		t.Run(tc.indexing, func(t *testing.T) {
			g := Meshgrid(tc.indexing, x, y)
			defer g[0].Release()
			defer g[1].Release()
			if !slices.Equal(g[0].Shape(), tc.shape) || !slices.Equal(g[1].Shape(), tc.shape) ||
				!slices.Equal(g[0].Float64s(), tc.gx) || !slices.Equal(g[1].Float64s(), tc.gy) {
				t.Errorf("got %v %v", g[0], g[1])
			}
		})
	}
	g := Meshgrid("ij", x, y)
	s := g[0].Sum()
	s.Backward()
	s.Release()
	g[0].Release()
	g[1].Release()
	if gr := x.Grad().Float64s(); !slices.Equal(gr, []float64{2, 2, 2}) {
		t.Errorf("grad %v", gr)
	}
	m := Ones(Shape{2, 2})
	defer m.Release()
	for _, tc := range []struct {
		name string
		fn   func()
		kind error
	}{
		{"indexing", func() { Meshgrid("ji", x) }, ErrArgument},
		{"none", func() { Meshgrid("ij") }, ErrArgument},
		{"2-D", func() { Meshgrid("ij", x, m) }, ErrShape},
		{"nil", func() { Meshgrid("ij", x, nil) }, ErrArgument},
	} {
		if err := Catch(func() { Tidy(func() { tc.fn() }) }); !errors.Is(err, tc.kind) {
			t.Errorf("%s: got %v, want %v", tc.name, err, tc.kind)
		}
	}
}

// TestEinsumAutocastMixedDTypes checks that inside an Autocast region
// Einsum takes float32, float16 and bfloat16 operands together in the
// region's dtype, as torch.einsum does through its autocast bmm, where it
// refused them with ErrDType; gradients reach each operand in its own
// dtype, nothing is left allocated, and outside a region or with a float64
// operand the mix is still an error.
func TestEinsumAutocastMixedDTypes(t *testing.T) {
	d := Sim(0)
	settle(d)
	before := MemoryAllocated(d)
	Tidy(func() {
		av := []float64{1, 2, 3, 4, 5, 6}
		bv := []float64{1, 0, -1, 2, 0.5, 1}
		want := []float64{0.5, 7, 2, 16} // [2,3]·[3,2]
		for _, tc := range []struct {
			name       string
			region     DType
			adt, bdt   DType
			eq         string
			wantDType  DType
			wantValues []float64
		}{
			{"f32 with bf16", BFloat16, Float32, BFloat16, "ij,jk->ik", BFloat16, want},
			{"bf16 with f32", BFloat16, BFloat16, Float32, "ij,jk->ik", BFloat16, want},
			{"f16 with f32 in f16", Float16, Float16, Float32, "ij,jk->ik", Float16, want},
			{"f16 with bf16 in bf16", BFloat16, Float16, BFloat16, "ij,jk->ik", BFloat16, want},
			{"batched with ellipsis", BFloat16, Float32, BFloat16, "...j,jk->...k", BFloat16, want},
		} {
			t.Run(tc.name, func(t *testing.T) {
				Tidy(func() { // a subtest runs in a goroutine of its own
					a := FromSlice(av, Shape{2, 3}, d).Cast(tc.adt).SetRequiresGrad(true)
					b := FromSlice(bv, Shape{3, 2}, d).Cast(tc.bdt).SetRequiresGrad(true)
					defer a.ZeroGrad() // gradients belong to their leaves, not to the Tidy
					defer b.ZeroGrad()
					var r *Tensor
					if err := Catch(func() { Autocast(tc.region, func() { r = Einsum(tc.eq, a, b) }) }); err != nil {
						t.Fatalf("Einsum(%q) of %s and %s under autocast %s: %v", tc.eq, tc.adt, tc.bdt, tc.region, err)
					}
					if r.DType() != tc.wantDType || !sameFloats(r.Float64s(), tc.wantValues, 0.05) {
						t.Errorf("got %s %v, want %s %v", r.DType(), r.Float64s(), tc.wantDType, tc.wantValues)
					}
					r.Sum().Backward()
					if a.Grad() == nil || b.Grad() == nil || a.Grad().DType() != tc.adt || b.Grad().DType() != tc.bdt {
						t.Fatalf("gradients %v and %v, want them in %s and %s", a.Grad(), b.Grad(), tc.adt, tc.bdt)
					}
					// d(sum)/da[i][j] = sum_k b[j][k]
					if got := a.Grad().Float64s(); !sameFloats(got, []float64{1, 1, 1.5, 1, 1, 1.5}, 0.02) {
						t.Errorf("grad of a: got %v", got)
					}
				})
			})
		}
		f32 := FromSlice(av, Shape{2, 3}, d)
		bf := FromSlice(bv, Shape{3, 2}, d).Cast(BFloat16)
		f64 := FromSlice(bv, Shape{3, 2}, d)
		for _, tc := range []struct {
			name string
			fn   func()
		}{
			{"outside a region", func() { Einsum("ij,jk->ik", f32, bf) }},
			{"float64 in a region", func() { Autocast(BFloat16, func() { Einsum("ij,jk->ik", f32.Cast(Float32), f64) }) }},
		} {
			if err := Catch(tc.fn); !errors.Is(err, ErrDType) {
				t.Errorf("%s: got %v, want ErrDType", tc.name, err)
			}
		}
	})
	if after := MemoryAllocated(d); after != before {
		t.Errorf("%d bytes on %s after Tidy, want %d", after, d, before)
	}
}
