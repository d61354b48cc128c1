package vram_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"reflect"
	"strings"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/internal/memtest"
	"github.com/vramgo/vram/memory"
)

// nilArgs returns arguments for a call of method m (receiver first) with a
// nil *Tensor at position pos and a fresh 2×2 tensor in every other tensor
// position, leaving out a final variadic parameter. The tensors made are
// appended to *made.
func nilArgs(mt reflect.Type, pos int, made *[]*vram.Tensor) []reflect.Value {
	return argsWith(mt, pos, nil, made)
}

// argsWith is nilArgs with bad, rather than nil, at position pos.
func argsWith(mt reflect.Type, pos int, bad *vram.Tensor, made *[]*vram.Tensor) []reflect.Value {
	tensorType := reflect.TypeFor[*vram.Tensor]()
	n := mt.NumIn()
	if mt.IsVariadic() {
		n--
	}
	args := make([]reflect.Value, n)
	for j := range args {
		switch pt := mt.In(j); {
		case pt == tensorType && j == pos:
			args[j] = reflect.ValueOf(bad)
		case pt == tensorType:
			x := vram.Ones(vram.Shape{2, 2})
			*made = append(*made, x)
			args[j] = reflect.ValueOf(x)
		case pt == reflect.TypeFor[vram.Device]():
			args[j] = reflect.ValueOf(vram.CPU)
		case pt == reflect.TypeFor[vram.DType]():
			args[j] = reflect.ValueOf(vram.Float32)
		default:
			args[j] = reflect.Zero(pt)
		}
	}
	return args
}

// checkNilError checks that err is vram's error for a nil tensor.
func checkNilError(t *testing.T, what string, err error) {
	t.Helper()
	var e *vram.Error
	switch {
	case err == nil:
		t.Errorf("%s: no error", what)
	case !errors.As(err, &e) || !errors.Is(err, vram.ErrArgument):
		t.Errorf("%s: %v (%T), want a *vram.Error of kind ErrArgument", what, err, err)
	case e.Op == "" || !strings.Contains(e.Detail, "nil *Tensor") || strings.Contains(err.Error(), "\n"):
		t.Errorf("%s: %q, want one line naming the op and the nil *Tensor", what, err)
	}
}

// TestNilTensorMethods calls every exported method of *Tensor with a nil
// receiver, and every method that takes tensors with a nil in each tensor
// argument: each must panic with a typed error that Catch returns, not
// with a nil-pointer dereference.
func TestNilTensorMethods(t *testing.T) {
	// Methods where nil is valid: Release of nil does nothing (like
	// Python's del of a name bound to None), String prints "Tensor(nil)"
	// for fmt, SetGrad(nil) clears the gradient, and a nil bound of
	// ClampTensor is a missing one (PyTorch's None).
	allowed := map[string]bool{"Release/0": true, "String/0": true, "SetGrad/1": true,
		"ClampTensor/1": true, "ClampTensor/2": true}
	// Methods where nil is a missing optional argument but the other
	// arguments nilArgs makes are refused for reasons of their own: the
	// float receiver of Bincount.
	optional := map[string]bool{"Bincount/1": true}
	tensorType := reflect.TypeFor[*vram.Tensor]()
	methods := 0
	for i := range tensorType.NumMethod() {
		m := tensorType.Method(i)
		for pos := range m.Type.NumIn() {
			if m.Type.In(pos) != tensorType || m.Type.IsVariadic() && pos == m.Type.NumIn()-1 {
				continue
			}
			name := m.Name + "/" + string(rune('0'+pos))
			var made []*vram.Tensor
			args := nilArgs(m.Type, pos, &made)
			err := vram.Catch(func() { m.Func.Call(args) })
			for _, x := range made {
				x.Release()
			}
			if allowed[name] {
				if err != nil {
					t.Errorf("%s: %v, want no error", name, err)
				}
				continue
			}
			if optional[name] {
				if err != nil && strings.Contains(err.Error(), "nil *Tensor") {
					t.Errorf("%s: %v, want nil taken as a missing argument", name, err)
				}
				continue
			}
			methods++
			what := m.Name + " with a nil receiver"
			if pos > 0 {
				what = m.Name + " with a nil argument " + string(rune('0'+pos))
			}
			checkNilError(t, what, err)
		}
	}
	if methods < 100 {
		t.Errorf("only %d method calls tried; the reflection walk is broken", methods)
	}
}

// TestZeroTensorMethods does what TestNilTensorMethods does with a zero
// Tensor (&vram.Tensor{}, or a Tensor variable never assigned from a
// factory or an op) in place of nil: each call must panic with an
// ErrArgument error saying so, where it was a nil-pointer dereference.
// Release of a zero Tensor does nothing, as of a nil one, and String
// names it.
func TestZeroTensorMethods(t *testing.T) {
	allowed := map[string]bool{"Release/0": true, "String/0": true}
	tensorType := reflect.TypeFor[*vram.Tensor]()
	methods := 0
	for i := range tensorType.NumMethod() {
		m := tensorType.Method(i)
		for pos := range m.Type.NumIn() {
			if m.Type.In(pos) != tensorType || m.Type.IsVariadic() && pos == m.Type.NumIn()-1 {
				continue
			}
			name := m.Name + "/" + string(rune('0'+pos))
			var made []*vram.Tensor
			args := argsWith(m.Type, pos, &vram.Tensor{}, &made)
			var err error
			func() {
				defer func() {
					if r := recover(); r != nil {
						e, ok := r.(error)
						if !ok {
							e = fmt.Errorf("%v", r)
						}
						err = e
					}
				}()
				m.Func.Call(args)
			}()
			for _, x := range made {
				x.Release()
			}
			if allowed[name] {
				if err != nil {
					t.Errorf("%s: %v, want no error", name, err)
				}
				continue
			}
			methods++
			var e *vram.Error
			if !errors.As(err, &e) || !errors.Is(err, vram.ErrArgument) || e.Op == "" || !strings.Contains(e.Detail, "zero Tensor") {
				t.Errorf("%s with a zero Tensor at %d: %v (%T), want a *vram.Error of kind ErrArgument naming the zero Tensor", m.Name, pos, err, err)
			}
		}
	}
	if methods < 100 {
		t.Errorf("only %d method calls tried; the reflection walk is broken", methods)
	}
	if s := (&vram.Tensor{}).String(); s != "Tensor(zero)" {
		t.Errorf("String of a zero Tensor: %q", s)
	}
	zero := &vram.Tensor{}
	x := vram.Ones(vram.Shape{2})
	defer x.Release()
	for _, tc := range []struct {
		name string
		fn   func()
	}{
		{"Cat", func() { vram.Cat([]*vram.Tensor{x, zero}, 0) }},
		{"Where", func() { vram.Where(x.GtScalar(0), zero, x) }},
		{"Linear bias", func() { vram.Linear(x, vram.Ones(vram.Shape{3, 2}), zero) }},
		{"ZerosLike", func() { vram.ZerosLike(zero) }},
		{"BatchNorm2dTracked counter", func() {
			c := vram.Ones(vram.Shape{2})
			vram.BatchNorm2dTracked(vram.Ones(vram.Shape{1, 2, 2, 2}), c, c, c, c, zero, true, 0.1, 1e-5)
		}},
		{"TidyResult", func() { vram.TidyResult(func() *vram.Tensor { return zero }).Sum() }},
	} {
		err := vram.Catch(tc.fn)
		var e *vram.Error
		if !errors.As(err, &e) || !errors.Is(err, vram.ErrArgument) || !strings.Contains(e.Detail, "zero Tensor") {
			t.Errorf("%s: %v, want an ErrArgument error naming the zero Tensor", tc.name, err)
		}
	}
}

// TestNilTensorFunctions passes nil tensors to the package's functions.
func TestNilTensorFunctions(t *testing.T) {
	x := vram.Ones(vram.Shape{2, 3})
	defer x.Release()
	w := vram.Ones(vram.Shape{4, 3})
	defer w.Release()
	idx := vram.FromSlice([]int64{0, 1}, nil)
	defer idx.Release()
	cond := x.GtScalar(0)
	defer cond.Release()
	tests := []struct {
		name string
		fn   func()
	}{
		{"Where cond", func() { vram.Where(nil, x, x) }},
		{"Where a", func() { vram.Where(cond, nil, x) }},
		{"Where b", func() { vram.Where(cond, x, nil) }},
		{"Cat element", func() { vram.Cat([]*vram.Tensor{x, nil}, 0) }},
		{"Stack element", func() { vram.Stack([]*vram.Tensor{x, nil}, 0) }},
		{"Linear x", func() { vram.Linear(nil, w, nil) }},
		{"Linear weight", func() { vram.Linear(x, nil, nil) }},
		{"LinearAct x", func() { vram.LinearAct(nil, w, nil, vram.ActReLU) }},
		{"BiasAct x", func() { vram.BiasAct(nil, x, vram.ActReLU) }},
		{"BiasAct bias", func() { vram.BiasAct(x, nil, vram.ActReLU) }},
		{"Embedding indices", func() { vram.Embedding(nil, w) }},
		{"Embedding weight", func() { vram.Embedding(idx, nil) }},
		{"CrossEntropy logits", func() { vram.CrossEntropy(nil, idx) }},
		{"CrossEntropy targets", func() { vram.CrossEntropy(x, nil) }},
		{"MSELoss pred", func() { vram.MSELoss(nil, x) }},
		{"MSELoss target", func() { vram.MSELoss(x, nil) }},
		{"LayerNorm input", func() { vram.LayerNorm(nil, []int{3}, nil, nil, 1e-5) }},
		{"RMSNorm input", func() { vram.RMSNorm(nil, []int{3}, nil, 1e-5) }},
		{"Normalize input", func() { vram.Normalize(nil, 2, 0, 1e-12) }},
		{"FusedAdamStep", func() { vram.FusedAdamStep(x, nil, x, x, 1e-3, 0.9, 0.999, 1e-8, 0, 1, true) }},
		{"FusedSGDStep", func() { vram.FusedSGDStep(nil, x, nil, 0.1, 0, 0, 0, false, true) }},
		{"Einsum operand", func() { vram.Einsum("ij,jk", x, nil) }},
		{"Meshgrid tensor", func() { vram.Meshgrid("ij", nil) }},
		{"SearchSorted sorted", func() { vram.SearchSorted(nil, x, vram.SearchSortedOptions{}) }},
		{"SearchSorted values", func() { vram.SearchSorted(x, nil, vram.SearchSortedOptions{}) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { checkNilError(t, tc.name, vram.Catch(tc.fn)) })
	}
	// Optional tensors may be nil.
	if err := vram.Catch(func() {
		vram.Linear(x, w, nil).Release()
		vram.LayerNorm(x, []int{3}, nil, nil, 1e-5).Release()
		vram.RMSNorm(x, []int{3}, nil, 1e-5).Release()
	}); err != nil {
		t.Errorf("nil bias or weight where optional: %v", err)
	}
}

// TestNilFunctions checks that a nil function given to a function that
// runs one is an ErrArgument error naming the function, not a nil-pointer
// dereference, and leaves the goroutine's settings as they were.
func TestNilFunctions(t *testing.T) {
	tests := []struct {
		name, op string
		fn       func()
	}{
		{"Tidy", "tidy", func() { vram.Tidy(nil) }},
		{"TidyResult", "tidy_result", func() { vram.TidyResult(nil) }},
		{"NoGrad", "no_grad", func() { vram.NoGrad(nil) }},
		{"EnableGrad", "enable_grad", func() { vram.EnableGrad(nil) }},
		{"SetGradEnabled", "set_grad_enabled", func() { vram.SetGradEnabled(false, nil) }},
		{"InferenceMode", "inference_mode", func() { vram.InferenceMode(nil) }},
		{"Autocast", "autocast", func() { vram.Autocast(vram.BFloat16, nil) }},
		{"NoAutocast", "no_autocast", func() { vram.NoAutocast(nil) }},
		{"Region", "region", func() { vram.Region("forward", nil) }},
		{"WithStream", "with stream", func() { vram.WithStream(vram.DefaultStream(vram.CPU), nil) }},
		{"Catch", "catch", func() {
			if err := vram.Catch(nil); err != nil {
				panic(err)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			func() {
				defer func() {
					if r := recover(); r != nil {
						e, ok := r.(error)
						if !ok {
							t.Fatalf("panicked with %v, want a *vram.Error", r)
						}
						err = e
					}
				}()
				tc.fn()
			}()
			var ve *vram.Error
			if !errors.As(err, &ve) || !errors.Is(err, vram.ErrArgument) || ve.Op != tc.op {
				t.Fatalf("got %v, want a *vram.Error of kind ErrArgument from %q", err, tc.op)
			}
			if !vram.GradEnabled() || vram.InferenceModeEnabled() {
				t.Error("the failed call changed the goroutine's grad mode")
			}
			if _, on := vram.AutocastDType(); on {
				t.Error("the failed call left an autocast region on")
			}
		})
	}
}

// TestErrorsNameTheCalledOp checks that operations built from others report
// errors under the name the caller used, not the one they delegate to.
func TestErrorsNameTheCalledOp(t *testing.T) {
	missing := vram.Sim(99) // no such device
	x := vram.Ones(vram.Shape{3, 4})
	defer x.Release()
	released := vram.Ones(vram.Shape{3, 4})
	released.Release()
	ints := vram.FromSlice([]int64{1, 2, 3}, nil)
	defer ints.Release()
	tests := []struct {
		op   string
		kind error
		fn   func()
	}{
		{"select", vram.ErrIndex, func() { x.Select(0, 3) }},
		{"select", vram.ErrIndex, func() { x.Select(1, -5) }},
		{"select", vram.ErrReleased, func() { released.Select(0, 0) }},
		{"ones", vram.ErrUnavailable, func() { vram.Ones(vram.Shape{2}, missing) }},
		{"zeros", vram.ErrUnavailable, func() { vram.Zeros(vram.Shape{2}, missing) }},
		{"scalar", vram.ErrUnavailable, func() { vram.Scalar(1, missing) }},
		{"uniform", vram.ErrUnavailable, func() { vram.Uniform(vram.Shape{2}, 0, 1, missing) }},
		{"full", vram.ErrUnavailable, func() { vram.Full(vram.Shape{2}, 1, missing) }},
		{"full", vram.ErrDType, func() { vram.Full(vram.Shape{2}, 1, vram.Int64, vram.WithGrad()) }},
		{"ones", vram.ErrDType, func() { vram.Ones(vram.Shape{2}, vram.Int64, vram.WithGrad()) }},
		{"empty", vram.ErrDType, func() { vram.Empty(vram.Shape{2}, vram.Int64, vram.WithGrad()) }},
		{"arange", vram.ErrDType, func() { vram.Arange(0, 3, 1, vram.Int64, vram.WithGrad()) }},
		{"from slice", vram.ErrDType, func() { vram.FromSlice([]int64{1, 2}, nil, vram.WithGrad()) }},
		{"move_to", vram.ErrUnavailable, func() {
			p := vram.Ones(vram.Shape{2})
			defer p.Release()
			p.MoveTo(missing)
		}},
		{"new_zeros", vram.ErrShape, func() { x.NewZeros(vram.Shape{-1}) }},
		{"new_ones", vram.ErrShape, func() { x.NewOnes(vram.Shape{2, -1}) }},
		{"new_full", vram.ErrShape, func() { x.NewFull(vram.Shape{-1}, 2) }},
		{"new_empty", vram.ErrShape, func() { x.NewEmpty(vram.Shape{-1}) }},
		{"new_randn", vram.ErrDType, func() { ints.NewRandn(vram.Shape{2}) }},
		{"new_tensor", vram.ErrShape, func() { x.NewTensor([]float32{1, 2, 3}, vram.Shape{2}) }},
		{"float", vram.ErrReleased, func() { released.Float() }},
		{"half", vram.ErrReleased, func() { released.Half() }},
		{"bfloat16", vram.ErrReleased, func() { released.BFloat16() }},
		{"long", vram.ErrReleased, func() { released.Long() }},
		{"sub", vram.ErrReleased, func() { released.SubScalar(1) }},
		{"std", vram.ErrIndex, func() { x.Std([]int{5}, 1, false) }},
		{"mt", vram.ErrShape, func() { ints.MT() }},
		{"expand_as", vram.ErrShape, func() { x.ExpandAs(ints) }},
		{"expand_as", vram.ErrReleased, func() { x.ExpandAs(released) }},
		{"bmm", vram.ErrShape, func() {
			a, b := vram.Ones(vram.Shape{1, 2, 3}), vram.Ones(vram.Shape{1, 4, 5})
			defer a.Release()
			defer b.Release()
			a.BMM(b)
		}},
		{"stack", vram.ErrIndex, func() { vram.Stack([]*vram.Tensor{x, x}, 5) }},
		{"embedding", vram.ErrIndex, func() {
			w := vram.Ones(vram.Shape{2, 4})
			defer w.Release()
			vram.Embedding(ints, w)
		}},
		{"cross_entropy", vram.ErrIndex, func() {
			targets := vram.FromSlice([]int64{0, 9, 1}, nil)
			defer targets.Release()
			vram.CrossEntropy(x, targets)
		}},
		{"cuda", vram.ErrUnavailable, func() { x.CUDA(99) }},
		{"cpu", vram.ErrReleased, func() { released.CPU() }},
	}
	for _, tc := range tests {
		t.Run(tc.op, func(t *testing.T) {
			err := vram.Catch(tc.fn)
			var e *vram.Error
			if !errors.As(err, &e) {
				t.Fatalf("error %v (%T), want a *vram.Error", err, err)
			}
			if e.Op != tc.op || !errors.Is(err, tc.kind) {
				t.Errorf("op %q, error %q; want op %q and kind %v", e.Op, err, tc.op, tc.kind)
			}
			if !strings.HasPrefix(err.Error(), "vram: "+tc.op+": ") {
				t.Errorf("message %q does not start with %q", err, "vram: "+tc.op+": ")
			}
		})
	}
}

// TestSimEnvironmentErrorReachesUser starts the test binary again,
// unconfigured, with an invalid sim environment (which vram reads once per
// process, at the first use of a device, when Configure was not called): no
// sim device may be listed, and using one must return the variable and its
// error, not "there are 0 sim devices".
func TestSimEnvironmentErrorReachesUser(t *testing.T) {
	if os.Getenv("VRAM_TEST_CHILD") == "TestSimEnvironmentErrorReachesUser" {
		simEnvChild(t, os.Getenv("VRAM_TEST_WANT"))
		return
	}
	if testing.Short() {
		t.Skip("starts processes")
	}
	tests := []struct{ env, want string }{
		{"VRAM_SIM_DEVICES=lots", `VRAM_SIM_DEVICES="lots": `},
		{"VRAM_SIM_DEVICES=1x", `VRAM_SIM_DEVICES="1x": `},
		{"VRAM_SIM_SHAPE_ONLY=maybe", `VRAM_SIM_SHAPE_ONLY="maybe": not a boolean`},
		{"VRAM_ALLOC_CONF=bogus", "VRAM_ALLOC_CONF: bogus"},
	}
	for _, tc := range tests {
		t.Run(tc.env, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestSimEnvironmentErrorReachesUser$", "-test.v")
			cmd.Env = append(os.Environ(), "VRAM_TEST_CHILD=TestSimEnvironmentErrorReachesUser", "VRAM_TEST_WANT="+tc.want, tc.env)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Errorf("%s: %v\n%s", tc.env, err, out)
			}
		})
	}
}

func simEnvChild(t *testing.T, want string) {
	if n := vram.SimDeviceCount(); n != 0 {
		t.Errorf("SimDeviceCount = %d with an invalid environment, want 0", n)
	}
	if vram.Sim(0).Available() {
		t.Error("sim:0 is available with an invalid environment")
	}
	err := vram.Sim(0).Check()
	var se *vram.EnvError
	var ce *memory.ConfigError
	if err == nil || !strings.Contains(err.Error(), want) || !errors.As(err, &se) && !errors.As(err, &ce) {
		t.Errorf("Check: %v, want an error containing %q that errors.As reaches", err, want)
	}
	err = vram.Catch(func() { vram.Ones(vram.Shape{2}, vram.Sim(0)) })
	var e *vram.Error
	if !errors.As(err, &e) || e.Op != "ones" || !errors.Is(err, vram.ErrUnavailable) || !strings.Contains(err.Error(), want) {
		t.Errorf("Ones on sim:0: %v, want an ErrUnavailable error of op ones containing %q", err, want)
	}
	if strings.Contains(err.Error(), "there are 0") || strings.Contains(err.Error(), "\n") {
		t.Errorf("Ones on sim:0: %q", err)
	}
	t.Log(err)
}

// TestFailedFactoryLeavesNothing checks that a factory whose options are
// refused (an integer tensor that requires grad) frees what it allocated.
func TestFailedFactoryLeavesNothing(t *testing.T) {
	memtest.Settle(vram.CPU)
	before := vram.MemoryAllocated(vram.CPU)
	for _, fn := range []func(){
		func() { vram.Ones(vram.Shape{1024}, vram.Int64, vram.WithGrad()) },
		func() { vram.FromSlice([]int64{1, 2}, nil, vram.WithGrad()) },
		func() { vram.Arange(0, 8, 1, vram.Int32, vram.WithGrad()) },
	} {
		if err := vram.Catch(fn); !errors.Is(err, vram.ErrDType) {
			t.Errorf("error %v, want ErrDType", err)
		}
	}
	if after := vram.MemoryAllocated(vram.CPU); after != before {
		t.Errorf("%d bytes allocated after the failed factories, %d before", after, before)
	}
}

// TestReleasedErrorSaysHowToFix checks the error of a tensor used after its
// release, the first one a program that releases by hand or uses Tidy
// meets: it names the tensor and the operation, and says how the tensor
// came to be released and how to keep it.
func TestReleasedErrorSaysHowToFix(t *testing.T) {
	released := vram.Ones(vram.Shape{2, 3})
	released.Release()
	var made *vram.Tensor
	vram.Tidy(func() { made = vram.Ones(vram.Shape{4}) })
	tests := []struct {
		name string
		use  func()
	}{
		{"add", func() { vram.Ones(vram.Shape{2, 3}).Add(released) }},
		{"item", func() { released.Item() }},
		{"made inside Tidy", func() { made.Sum() }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := vram.Catch(tc.use)
			if !errors.Is(err, vram.ErrReleased) {
				t.Fatalf("%v, want an error of kind ErrReleased", err)
			}
			for _, w := range []string{"was already released", "vram.Tidy", "vram.Keep", "Clone"} {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%q lacks %q", err, w)
				}
			}
		})
	}
}

// TestItemErrorSaysHowToFix checks that Item on a tensor of other than one
// element says, as PyTorch does, how many elements it has, with its shape,
// and what to call instead.
func TestItemErrorSaysHowToFix(t *testing.T) {
	for _, tc := range []struct {
		shape vram.Shape
		want  string
	}{
		{vram.Shape{2, 3}, "a tensor with 6 elements (shape [2, 3]) cannot be converted to a number"},
		{vram.Shape{0}, "a tensor with 0 elements (shape [0]) cannot be converted to a number"},
	} {
		t.Run(fmt.Sprint(tc.shape), func(t *testing.T) {
			err := vram.Catch(func() { vram.Ones(tc.shape).Item() })
			if !errors.Is(err, vram.ErrShape) {
				t.Fatalf("%v, want an error of kind ErrShape", err)
			}
			for _, w := range []string{tc.want, "Sum", "Float64s"} {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%q lacks %q", err, w)
				}
			}
		})
	}
}
