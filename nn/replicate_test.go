package nn_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/internal/memtest"
	"github.com/vramgo/vram/nn"
)

// twoPart is a user's model as a Go programmer writes it: nn.Base, layers
// in unexported fields, a tensor kept in a field (a buffer), the device it
// makes tensors on, a layer shared by two places and plain settings.
type twoPart struct {
	nn.Base
	sub1, sub2 *nn.Sequential
	head       *nn.Linear // also sub2's last layer
	offset     *vram.Tensor
	dev        vram.Device
	scale      float64
	byName     map[string]nn.Module
	extra      []any
	self       *twoPart // a cycle
}

func newTwoPart(dev vram.Device) *twoPart {
	head := nn.NewLinear(4, 2, dev)
	m := &twoPart{
		sub1:   nn.NewSequential(nn.NewLinear(3, 4, dev), nn.NewTanh(), nn.NewDropout(0)),
		sub2:   nn.NewSequential(nn.NewLayerNorm([]int{4}, 1e-5, dev), head),
		head:   head,
		offset: vram.Keep(vram.Full(vram.Shape{2}, 0.5, dev)),
		dev:    dev,
		scale:  2,
	}
	m.byName = map[string]nn.Module{"first": m.sub1}
	m.extra = []any{m.offset, "note"}
	m.self = m
	m.RegisterModule("sub1", m.sub1)
	m.RegisterModule("sub2", m.sub2)
	return m
}

func (m *twoPart) Forward(x *vram.Tensor) *vram.Tensor {
	in := x.To(m.dev)
	defer in.Release()
	h := m.sub1.Forward(in)
	defer h.Release()
	y := m.sub2.Forward(h)
	defer y.Release()
	s := y.MulScalar(m.scale)
	defer s.Release()
	return s.Add(m.offset)
}

// frozen is a module with a parameter that does not require grad.
type frozen struct {
	nn.Base
	w *vram.Tensor
}

func (f *frozen) Forward(x *vram.Tensor) *vram.Tensor { return x.Mul(f.w) }

// ownReplica implements nn.Replicator.
type ownReplica struct {
	nn.Base
	calls *int
	w     *vram.Tensor
}

func (o *ownReplica) Forward(x *vram.Tensor) *vram.Tensor { return x.Mul(o.w) }

func (o *ownReplica) Replicate(d vram.Device) (nn.Module, error) {
	*o.calls++
	c := &ownReplica{calls: o.calls}
	vram.NoGrad(func() { c.w = vram.Keep(o.w.To(d)) })
	c.w.SetRequiresGrad(true)
	c.RegisterParameter("w", c.w)
	return c, nil
}

func sameValues(t *testing.T, what string, a, b *vram.Tensor) {
	t.Helper()
	if !slices.Equal(a.Shape(), b.Shape()) || a.DType() != b.DType() {
		t.Fatalf("%s: %s %v and %s %v", what, a.DType(), a.Shape(), b.DType(), b.Shape())
	}
	if !slices.Equal(a.Float64s(), b.Float64s()) {
		t.Fatalf("%s: values differ: %v and %v", what, a.Float64s(), b.Float64s())
	}
}

func TestReplicate(t *testing.T) {
	for _, c := range []struct{ from, to vram.Device }{
		{vram.CPU, vram.Sim(0)},
		{vram.Sim(0), vram.Sim(1)},
		{vram.Sim(1), vram.CPU},
		{vram.CPU, vram.CPU},
	} {
		t.Run(c.from.String()+"->"+c.to.String(), func(t *testing.T) {
			vram.ManualSeed(3)
			m := newTwoPart(c.from)
			defer nn.Release(m)
			defer m.offset.Release()
			m.Eval()
			rm, err := nn.Replicate(m, c.to)
			if err != nil {
				t.Fatal(err)
			}
			defer nn.Release(rm)
			r, ok := rm.(*twoPart)
			if !ok {
				t.Fatalf("replica is %T", rm)
			}
			want, got := m.NamedParameters(), r.NamedParameters()
			if len(got) != len(want) {
				t.Fatalf("replica has %d parameters, want %d", len(got), len(want))
			}
			for i := range want {
				w, g := want[i], got[i]
				if g.Name != w.Name || g.Tensor == w.Tensor || g.Tensor.Device() != c.to ||
					!g.Tensor.IsLeaf() || !g.Tensor.RequiresGrad() || g.Tensor.Grad() != nil {
					t.Fatalf("parameter %q: name %q, same tensor %v, device %v, leaf %v, grad %v", w.Name, g.Name,
						g.Tensor == w.Tensor, g.Tensor.Device(), g.Tensor.IsLeaf(), g.Tensor.RequiresGrad())
				}
				sameValues(t, w.Name, g.Tensor, w.Tensor)
			}
			// The structure: fields and registered children are the same
			// replicas, shared layers stay shared, maps and interfaces are
			// followed, and the buffer and the device moved.
			if r.sub1 == m.sub1 || nn.Module(r.sub1) != r.NamedChildren()[0].Module || r.byName["first"] != nn.Module(r.sub1) {
				t.Fatal("sub1 is not replicated once")
			}
			if r.head == m.head || r.sub2.At(1) != nn.Module(r.head) {
				t.Fatal("the shared head is not shared in the replica")
			}
			if r.sub1.At(0) == m.sub1.At(0) || r.sub1.At(0).(*nn.Linear).Weight != r.sub1.At(0).Parameters()[0] {
				t.Fatal("a Sequential's layer is not replicated with its parameters")
			}
			if r.offset == m.offset || r.offset.Device() != c.to || r.extra[0] != any(r.offset) || r.extra[1] != "note" {
				t.Fatalf("the buffer: %v on %v, extra %v", r.offset == m.offset, r.offset.Device(), r.extra)
			}
			if r.self != r {
				t.Fatal("a pointer back to the module does not point to the replica")
			}
			if r.dev != c.to || r.scale != 2 {
				t.Fatalf("dev %v, scale %v", r.dev, r.scale)
			}
			if r.Training() || r.sub1.At(2).Training() {
				t.Fatal("the replica lost evaluation mode")
			}
			// Same outputs, then independent training.
			x := vram.Randn(vram.Shape{5, 3})
			defer x.Release()
			vram.NoGrad(func() {
				a, b := m.Forward(x), r.Forward(x)
				defer a.Release()
				defer b.Release()
				sameValues(t, "outputs", a.To(vram.CPU), b.To(vram.CPU))
			})
			r.Train()
			if m.Training() || m.sub1.At(2).Training() {
				t.Fatal("Train on the replica reached the module")
			}
			before := slices.Clone(m.head.Weight.Float64s())
			vram.Tidy(func() {
				out := r.Forward(x)
				out.Sum().Backward()
				vram.NoGrad(func() { r.head.Weight.SubInPlace(r.head.Weight.Grad()) })
			})
			if m.head.Weight.Grad() != nil || !slices.Equal(m.head.Weight.Float64s(), before) {
				t.Fatal("training the replica changed the module")
			}
		})
	}
}

func TestReplicateFrozenAndOwn(t *testing.T) {
	f := &frozen{w: vram.Keep(vram.Full(vram.Shape{2}, 3))}
	f.RegisterParameter("w", f.w)
	defer nn.Release(f)
	calls := 0
	o := &ownReplica{calls: &calls, w: vram.Keep(vram.Full(vram.Shape{2}, 1, vram.WithGrad()))}
	o.RegisterParameter("w", o.w)
	defer nn.Release(o)
	seq := nn.NewSequential(f, o, nn.Func(func(x *vram.Tensor) *vram.Tensor { return x.Neg() }))

	r, err := nn.Replicate(seq, vram.Sim(0))
	if err != nil {
		t.Fatal(err)
	}
	defer nn.Release(r)
	rs := r.(*nn.Sequential)
	if fw := rs.At(0).(*frozen).w; fw.RequiresGrad() || fw.Device() != vram.Sim(0) {
		t.Fatalf("frozen parameter: requires grad %v on %v", fw.RequiresGrad(), fw.Device())
	}
	if calls != 1 || rs.At(1).(*ownReplica).w.Device() != vram.Sim(0) {
		t.Fatalf("Replicate called %d times", calls)
	}
	x := vram.Ones(vram.Shape{2}, vram.Sim(0))
	defer x.Release()
	y := rs.Forward(x)
	defer y.Release()
	if got := y.Float64s(); !slices.Equal(got, []float64{-3, -3}) {
		t.Fatalf("forward: %v", got)
	}
}

// badReplica's Replicate returns a module of another type.
type badReplica struct{ ownReplica }

func (b *badReplica) Replicate(vram.Device) (nn.Module, error) { return nn.NewReLU(), nil }

// failing's Replicate fails.
type failing struct{ nn.ReLU }

func (*failing) Replicate(vram.Device) (nn.Module, error) { return nil, errors.New("cannot") }

// nilReplica's Replicate returns a nil module of its own type, and no
// error.
type nilReplica struct{ nn.ReLU }

func (*nilReplica) Replicate(vram.Device) (nn.Module, error) { return (*nilReplica)(nil), nil }

// noReplica's Replicate returns nil and no error.
type noReplica struct{ nn.ReLU }

func (*noReplica) Replicate(vram.Device) (nn.Module, error) { return nil, nil }

func TestReplicateErrors(t *testing.T) {
	released := nn.NewLinear(2, 2)
	released.Bias.Release()
	defer nn.Release(released)
	tests := []struct {
		name string
		m    nn.Module
		dev  vram.Device
		want string
	}{
		{"nil module", nil, vram.CPU, "nil module"},
		{"unavailable device", nn.NewReLU(), vram.Sim(9), "sim:9"},
		{"released parameter", released, vram.Sim(0), "parameter bias: the tensor was released"},
		{"failing Replicator", nn.NewSequential(nn.NewReLU(), &failing{}), vram.Sim(0), "cannot"},
		{"Replicator of another type", nn.NewSequential(&badReplica{}), vram.Sim(0), "returned *nn.ReLU"},
		{"Replicator of another type, at the top", &badReplica{}, vram.Sim(0), "returned *nn.ReLU"},
		{"Replicator returning nil, at the top", &noReplica{}, vram.Sim(0), "returned <nil>"},
		{"Replicator returning a nil pointer, at the top", &nilReplica{}, vram.Sim(0), "returned *nn_test.nilReplica"},
		{"Replicator returning a nil pointer", nn.NewSequential(nn.NewReLU(), &nilReplica{}), vram.Sim(0), "returned *nn_test.nilReplica"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			memtest.Settle(vram.Sim(0))
			before := vram.MemoryAllocated(vram.Sim(0))
			r, err := nn.Replicate(tt.m, tt.dev)
			if err == nil || r != nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, %v; want an error with %q", r, err, tt.want)
			}
			if after := vram.MemoryAllocated(vram.Sim(0)); after != before {
				t.Fatalf("a failed Replicate left %d bytes on sim:0", after-before)
			}
		})
	}
}
