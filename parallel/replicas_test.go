package parallel

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/nn"
)

// exiter doubles its input, except on device on, where it ends its
// goroutine with runtime.Goexit (as t.FailNow in a module under test does).
type exiter struct {
	nn.Base
	on vram.Device
}

func (m *exiter) Forward(x *vram.Tensor) *vram.Tensor {
	if x.Device() == m.on {
		runtime.Goexit()
	}
	return x.MulScalar(2)
}

// TestWorkerGoexit checks that a worker goroutine that ends without
// returning or panicking fails the call with an error naming it, rather
// than losing its share of the batch (DataParallel) or leaving the other
// stages waiting for ever (Pipeline).
func TestWorkerGoexit(t *testing.T) {
	mse := nn.MSELoss
	stages := func() []Stage {
		return []Stage{{&exiter{on: vram.Sim(1)}, vram.Sim(0)}, {&exiter{on: vram.Sim(1)}, vram.Sim(1)}, {&exiter{on: vram.Sim(1)}, vram.Sim(2)}}
	}
	for _, tc := range []struct {
		name string
		who  string
		call func(x *vram.Tensor)
	}{
		{"data parallel forward", "replica 1 on sim:1", func(x *vram.Tensor) {
			dp, err := NewDataParallel(&exiter{on: vram.Sim(1)}, simDevs(2))
			if err != nil {
				panic(err)
			}
			defer dp.Release()
			dp.Forward(x)
		}},
		{"data parallel forward loss", "replica 1 on sim:1", func(x *vram.Tensor) {
			dp, err := NewDataParallel(&exiter{on: vram.Sim(1)}, simDevs(2))
			if err != nil {
				panic(err)
			}
			defer dp.Release()
			dp.ForwardLoss(x, x, mse)
		}},
		{"pipeline forward", "stage 1 on sim:1", func(x *vram.Tensor) {
			p, err := NewPipeline(stages(), MicroBatches(2))
			if err != nil {
				panic(err)
			}
			p.Forward(x)
		}},
		{"pipeline GPipe", "stage 1 on sim:1", func(x *vram.Tensor) {
			p, err := NewPipeline(stages(), MicroBatches(2))
			if err != nil {
				panic(err)
			}
			p.ForwardBackward(x, x, mse)
		}},
		{"pipeline 1F1B", "stage 1 on sim:1", func(x *vram.Tensor) {
			p, err := NewPipeline(stages(), MicroBatches(2), WithSchedule(OneFOneB))
			if err != nil {
				panic(err)
			}
			p.ForwardBackward(x, x, mse)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			done := make(chan error, 1)
			go func() {
				done <- vram.Catch(func() { vram.Tidy(func() { tc.call(vram.Ones(vram.Shape{4, 2})) }) })
			}()
			select {
			case err := <-done:
				if !errors.Is(err, vram.ErrArgument) || !strings.Contains(err.Error(), tc.who) || !strings.Contains(err.Error(), "Goexit") {
					t.Fatalf("got %v, want an ErrArgument naming %s and runtime.Goexit", err, tc.who)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("still waiting after 5s")
			}
		})
	}
}

// TestWrappersKeepBuffers checks that the state of DataParallel,
// DistributedDataParallel and Pipeline includes the module's buffers
// (BatchNorm's running statistics), under the names of their parameters'
// scheme, and that saving a wrapper and loading the file into another
// restores them, as a PyTorch state_dict of the wrapper does.
func TestWrappersKeepBuffers(t *testing.T) {
	comm := func() Communicator { return tcpGroup(t, 1, 5*time.Second)[0] }
	for _, tc := range []struct {
		name   string
		prefix string // of the module's names in the wrapper's state
		wrap   func(m *bnNet) (nn.Module, func())
	}{
		{"data parallel", "module.", func(m *bnNet) (nn.Module, func()) {
			dp, err := NewDataParallel(m, simDevs(2))
			if err != nil {
				t.Fatal(err)
			}
			return dp, func() { dp.Release() }
		}},
		{"distributed data parallel", "", func(m *bnNet) (nn.Module, func()) {
			m.To(vram.CPU)
			ddp, err := NewDistributedDataParallel(m, comm(), DDPOptions{})
			if err != nil {
				t.Fatal(err)
			}
			return ddp, func() { ddp.Close() }
		}},
		{"pipeline", "0.", func(m *bnNet) (nn.Module, func()) {
			p, err := NewPipeline([]Stage{{m, vram.Sim(0)}})
			if err != nil {
				t.Fatal(err)
			}
			return p, func() {}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := newBNNet(1, vram.Sim(0))
			defer nn.Release(src)
			vram.NoGrad(func() { src.bn.RunningMean.FillInPlace(3) })
			w, done := tc.wrap(src)
			defer done()
			state := nn.StateDict(w)
			for _, b := range nn.NamedBuffers(src) {
				if got := state[tc.prefix+b.Name]; got != b.Tensor {
					t.Errorf("state[%q] is %v, want the module's buffer", tc.prefix+b.Name, got)
				}
			}
			path := t.TempDir() + "/w.safetensors"
			if err := nn.Save(w, path); err != nil {
				t.Fatal(err)
			}
			dst := newBNNet(2, vram.Sim(0))
			defer nn.Release(dst)
			w2, done2 := tc.wrap(dst)
			defer done2()
			if err := nn.Load(w2, path); err != nil {
				t.Fatal(err)
			}
			if got := dst.bn.RunningMean.Float64s(); got[0] != 3 || got[1] != 3 {
				t.Errorf("loaded running mean %v, want [3 3]", got)
			}
		})
	}
}

// castRecorder is a Linear that records the autocast dtype of each call.
type castRecorder struct {
	nn.Base
	lin  *nn.Linear
	mu   sync.Mutex
	seen []string
}

func newCastRecorder() *castRecorder {
	m := &castRecorder{lin: nn.NewLinear(2, 2)}
	m.RegisterModule("lin", m.lin)
	return m
}

func (m *castRecorder) Forward(x *vram.Tensor) *vram.Tensor {
	dt, ok := vram.AutocastDType()
	m.mu.Lock()
	m.seen = append(m.seen, fmt.Sprint(dt, ok))
	m.mu.Unlock()
	return m.lin.Forward(x)
}

// TestWorkersAutocast checks that the goroutines of DataParallel and
// Pipeline run in the caller's autocast region, as PyTorch's DataParallel
// carries autocast into its threads: every replica and stage computes in
// float16 under amp.Autocast(vram.Float16, ...).
func TestWorkersAutocast(t *testing.T) {
	mse := func(out, y *vram.Tensor) *vram.Tensor { return nn.MSELoss(out.Cast(vram.Float32), y) }
	for _, tc := range []struct {
		name string
		run  func(mods []*castRecorder, x *vram.Tensor)
	}{
		{"data parallel forward", func(mods []*castRecorder, x *vram.Tensor) {
			dp, err := NewDataParallel(mods[0], simDevs(2))
			if err != nil {
				panic(err)
			}
			defer dp.Release()
			if out := dp.Forward(x); out.DType() != vram.Float16 {
				panic(&vram.Error{Op: "test", Kind: vram.ErrDType, Detail: fmt.Sprintf("output %v", out.DType())})
			}
			for _, r := range dp.Replicas()[1:] { // the replica records into its own copy
				mods[0].seen = append(mods[0].seen, r.(*castRecorder).seen...)
			}
		}},
		{"data parallel forward loss", func(mods []*castRecorder, x *vram.Tensor) {
			dp, err := NewDataParallel(mods[0], simDevs(2))
			if err != nil {
				panic(err)
			}
			defer dp.Release()
			dp.ForwardLoss(x, x, mse).Backward()
			for _, r := range dp.Replicas()[1:] {
				mods[0].seen = append(mods[0].seen, r.(*castRecorder).seen...)
			}
		}},
		{"pipeline forward", func(mods []*castRecorder, x *vram.Tensor) {
			p, err := NewPipeline([]Stage{{mods[0], vram.Sim(0)}, {mods[1], vram.Sim(1)}}, MicroBatches(2))
			if err != nil {
				panic(err)
			}
			if out := p.Forward(x); out.DType() != vram.Float16 {
				panic(&vram.Error{Op: "test", Kind: vram.ErrDType, Detail: fmt.Sprintf("output %v", out.DType())})
			}
		}},
		{"pipeline forward backward", func(mods []*castRecorder, x *vram.Tensor) {
			p, err := NewPipeline([]Stage{{mods[0], vram.Sim(0)}, {mods[1], vram.Sim(1)}}, MicroBatches(2), WithSchedule(OneFOneB))
			if err != nil {
				panic(err)
			}
			p.ForwardBackward(x, x, mse)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mods := []*castRecorder{newCastRecorder(), newCastRecorder()}
			defer nn.Release(mods[0])
			defer nn.Release(mods[1])
			err := vram.Catch(func() {
				vram.Tidy(func() {
					vram.Autocast(vram.Float16, func() { tc.run(mods, vram.Ones(vram.Shape{4, 2})) })
				})
			})
			if err != nil {
				t.Fatal(err)
			}
			var seen []string
			for _, m := range mods {
				seen = append(seen, m.seen...)
			}
			if len(seen) < 2 {
				t.Fatalf("forwards seen: %v", seen)
			}
			for _, s := range seen {
				if s != "float16 true" {
					t.Fatalf("autocast in the workers' forwards: %v, want float16 in all", seen)
				}
			}
		})
	}
}

// TestBadArgumentsWrapSentinels: the constructors and calls of data
// parallelism, pipelines and groups return errors that errors.Is matches
// with vram's sentinels (and ErrAborted for a closed communicator), as
// the DDP's and the TCP communicator's do.
func TestBadArgumentsWrapSentinels(t *testing.T) {
	lin := func() nn.Module { return nn.NewLinear(2, 2) }
	released := func() *DataParallelModule {
		dp, err := NewDataParallel(lin(), simDevs(2))
		if err != nil {
			t.Fatal(err)
		}
		dp.Release()
		return dp
	}
	closedComm := func() Communicator {
		comms, err := NewLocalGroup(simDevs(2))
		if err != nil {
			t.Fatal(err)
		}
		comms[0].Close()
		return comms[0]
	}
	comms2 := func() []Communicator {
		comms, err := NewLocalGroup(simDevs(2))
		if err != nil {
			t.Fatal(err)
		}
		return comms
	}
	dpErr := func(m nn.Module, devs []vram.Device, opts ...DataParallelOption) func() error {
		return func() error {
			dp, err := NewDataParallel(m, devs, opts...)
			if err == nil {
				dp.Release()
			}
			return err
		}
	}
	pipeErr := func(stages []Stage, opts ...PipelineOption) func() error {
		return func() error { _, err := NewPipeline(stages, opts...); return err }
	}
	groupErr := func(devs []vram.Device, opts LocalOptions) func() error {
		return func() error { _, err := NewLocalGroupOptions(devs, opts); return err }
	}
	tests := []struct {
		name string
		err  func() error
		want error
	}{
		{"data parallel, nil module", dpErr(nil, simDevs(2)), vram.ErrArgument},
		{"data parallel, no devices", dpErr(lin(), nil), vram.ErrArgument},
		{"data parallel, a device twice", dpErr(lin(), []vram.Device{vram.Sim(0), vram.Sim(0)}), vram.ErrArgument},
		{"data parallel, unavailable device", dpErr(lin(), []vram.Device{vram.Sim(0), vram.Sim(9)}), vram.ErrUnavailable},
		{"data parallel, nil option", dpErr(lin(), simDevs(2), nil), vram.ErrArgument},
		{"data parallel, negative bucket", dpErr(lin(), simDevs(2), GradientBucketBytes(-1)), vram.ErrArgument},
		{"data parallel, too few communicators", dpErr(lin(), simDevs(2), WithCommunicators(comms2()[:1])), vram.ErrArgument},
		{"data parallel, communicators on other devices", dpErr(lin(), []vram.Device{vram.Sim(2), vram.Sim(3)}, WithCommunicators(comms2())), vram.ErrDevice},
		{"data parallel, nil optimizer constructor", func() error {
			dp, err := NewDataParallel(lin(), simDevs(2))
			if err != nil {
				return err
			}
			defer dp.Release()
			_, err = dp.Optimizer(nil)
			return err
		}, vram.ErrArgument},
		{"data parallel, SyncGradients after Release", func() error { return released().SyncGradients() }, vram.ErrReleased},
		{"data parallel, SyncParameters after Release", func() error { return released().SyncParameters() }, vram.ErrReleased},
		{"pipeline, no stages", pipeErr(nil), vram.ErrArgument},
		{"pipeline, nil option", pipeErr([]Stage{{lin(), vram.Sim(0)}}, nil), vram.ErrArgument},
		{"pipeline, no micro-batches", pipeErr([]Stage{{lin(), vram.Sim(0)}}, MicroBatches(0)), vram.ErrArgument},
		{"pipeline, unknown schedule", pipeErr([]Stage{{lin(), vram.Sim(0)}}, WithSchedule(9)), vram.ErrArgument},
		{"pipeline, stage without module", pipeErr([]Stage{{nil, vram.Sim(0)}}), vram.ErrArgument},
		{"local group, no devices", groupErr(nil, LocalOptions{}), vram.ErrArgument},
		{"local group, a device twice", groupErr([]vram.Device{vram.Sim(1), vram.Sim(1)}, LocalOptions{}), vram.ErrArgument},
		{"local group, unavailable device", groupErr([]vram.Device{vram.Sim(9)}, LocalOptions{}), vram.ErrUnavailable},
		{"local group, negative timeout", groupErr(simDevs(1), LocalOptions{Timeout: -1}), vram.ErrArgument},
		{"local group, closed communicator", func() error { return closedComm().Barrier() }, ErrAborted},
		{"NCCL group, no devices", func() error { _, err := NewNCCLGroup(nil); return err }, vram.ErrArgument},
		{"NCCL group, a sim device", func() error { _, err := NewNCCLGroup(simDevs(1)); return err }, vram.ErrDevice},
		{"NCCL rank out of range", func() error { _, err := NewNCCLRank(2, 2, vram.CUDA(0), [128]byte{1}); return err }, vram.ErrArgument},
		{"NCCL rank on the CPU", func() error { _, err := NewNCCLRank(0, 1, vram.CPU, [128]byte{1}); return err }, vram.ErrDevice},
		{"NCCL rank, zero id", func() error { _, err := NewNCCLRank(0, 1, vram.CUDA(0), [128]byte{}); return err }, vram.ErrArgument},
		{"NCCL negative timeout", func() error {
			_, err := NewNCCLRankOptions(0, 1, vram.CUDA(0), [128]byte{1}, NCCLOptions{Timeout: -1})
			return err
		}, vram.ErrArgument},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.err()
			if !errors.Is(err, tt.want) {
				t.Errorf("error %v, want one matching %v", err, tt.want)
			}
		})
	}
}
