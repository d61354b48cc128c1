package parallel

import (
	"errors"
	"strings"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/nn"
	"github.com/vramgo/vram/optim"
)

// TestDataParallelModuleMovedAway moves the module off its first device
// after NewDataParallel, as a user used to calling model.To(dev) might.
// Every call that needs the replicas in place must refuse with an error of
// kind vram.ErrDevice before it changes anything, and in particular before
// a collective aborts the communicators for good: moving the module back
// must leave a DataParallelModule that trains as before.
func TestDataParallelModuleMovedAway(t *testing.T) {
	s0, s1, s2 := vram.Sim(0), vram.Sim(1), vram.Sim(2)
	x := vram.Rand(vram.Shape{6, 3}, vram.WithGenerator(vram.NewGenerator(1)))
	defer x.Release()
	y := vram.Rand(vram.Shape{6, 2}, vram.WithGenerator(vram.NewGenerator(2)))
	defer y.Release()
	tests := []struct {
		name string
		call func(dp *DataParallelModule, opt *ReplicaOptimizer) error
	}{
		{"Forward", func(dp *DataParallelModule, _ *ReplicaOptimizer) error {
			return vram.Catch(func() { vram.Tidy(func() { dp.Forward(x) }) })
		}},
		{"ForwardLoss", func(dp *DataParallelModule, _ *ReplicaOptimizer) error {
			return vram.Catch(func() { vram.Tidy(func() { dp.ForwardLoss(x, y, nn.MSELoss) }) })
		}},
		{"SyncGradients", func(dp *DataParallelModule, _ *ReplicaOptimizer) error { return dp.SyncGradients() }},
		{"SyncParameters", func(dp *DataParallelModule, _ *ReplicaOptimizer) error { return dp.SyncParameters() }},
		{"ClipGradNorm", func(dp *DataParallelModule, _ *ReplicaOptimizer) error {
			_, err := dp.ClipGradNorm(1)
			return err
		}},
		{"Step", func(_ *DataParallelModule, opt *ReplicaOptimizer) error { return vram.Catch(opt.Step) }},
	}
	for _, tt := range tests {
		for _, moved := range []struct {
			name    string
			replica int
			to      vram.Device
			grad    bool // move a gradient of the replica on its own, not the replica
		}{{"module to a third device", 0, s2, false}, {"module to replica 1's device", 0, s1, false},
			{"replica 1 to the CPU", 1, vram.CPU, false}, {"a gradient of replica 1 to the CPU", 1, vram.CPU, true}} {
			t.Run(tt.name+"/"+moved.name, func(t *testing.T) {
				m := newUserNet(3, 4, 2)
				dp, err := NewDataParallel(m, []vram.Device{s0, s1})
				if err != nil {
					t.Fatal(err)
				}
				defer dp.Release()
				opt, err := dp.Optimizer(func(ps []*vram.Tensor) (optim.Optimizer, error) {
					return optim.NewSGD(ps, optim.SGDConfig{LR: 0.1})
				})
				if err != nil {
					t.Fatal(err)
				}
				vram.Tidy(func() { dp.ForwardLoss(x, y, nn.MSELoss).Backward() })
				r := dp.Replicas()[moved.replica]
				move := func(d vram.Device) {
					if moved.grad {
						r.Parameters()[0].Grad().MoveTo(d)
					} else {
						r.To(d)
					}
				}
				move(moved.to)
				err = tt.call(dp, opt)
				if !errors.Is(err, vram.ErrDevice) {
					t.Fatalf("with %s: %v, want an error of kind ErrDevice", moved.name, err)
				}
				if !strings.Contains(err.Error(), moved.to.String()) {
					t.Errorf("the error does not name the device %v the parameters are on: %v", moved.to, err)
				}
				move(dp.Devices()[moved.replica])
				if err := vram.Catch(func() {
					opt.Step()
					opt.ZeroGrad()
					vram.Tidy(func() { dp.ForwardLoss(x, y, nn.MSELoss).Backward() })
					opt.Step()
					opt.ZeroGrad()
				}); err != nil {
					t.Fatalf("after moving it back: %v", err)
				}
				sameParams(t, "replica 1 after moving back", dp.Replicas()[1], m)
			})
		}
	}
}
