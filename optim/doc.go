// Package optim provides optimizers that update the parameters of a model
// from their gradients, in the style of torch.optim: [SGD] (with momentum,
// dampening, Nesterov momentum and weight decay), [Adam], [AdamW],
// [RMSprop], [Adagrad], [Adamax], [NAdam], [RAdam], [Adadelta], [ASGD]
// (with its running average of the parameters, [ASGD.Average]) and
// [Rprop], and [LBFGS] (whose Step takes a closure, with PyTorch's
// strong-Wolfe line search; it is no [Optimizer], so schedules, [Save] and [Load] do not
// take it, and its state is copied in memory with [LBFGS.State] and
// [LBFGS.LoadState]), each following PyTorch's update rules exactly,
// their parameters in one group or in several with hyper-parameters of
// their own ([ParamGroup], PyTorch's param_groups); learning-rate schedules
// ([Schedule]: [NewStepLR], [NewMultiStepLR], [NewExponentialLR],
// [NewCosineAnnealingLR], [NewCosineAnnealingWarmRestarts] (SGDR),
// [NewLinearLR] for warm-up, [NewConstantLR],
// [NewPolynomialLR], [NewLambdaLR], [NewMultiplicativeLR], [NewOneCycleLR],
// [NewCyclicLR], [NewSWALR] for stochastic weight averaging, one after
// the other with [NewSequentialLR] or together with
// [NewChainedScheduler]) and [ReduceLROnPlateau], which follows a metric,
// as torch.optim.lr_scheduler has them, each group's rate driven from its
// own base rate; checkpoints of an optimizer's state ([Save] and [Load],
// beside nn.Save and nn.Load for the model), so that training resumes
// exactly where it stopped; and [ClipGradNorm] (with other norms and a
// check for non-finite norms in [ClipGradNormWith], and its two halves
// [GetTotalNorm] and [ClipGradsWithNorm]) and [ClipGradValue],
// which PyTorch keeps in torch.nn.utils but which live here, next to the
// optimizers that use clipped gradients, so that package nn stays free of
// training-loop concerns. Stochastic weight averaging and exponential
// moving averages of a model's weights (torch.optim.swa_utils'
// AveragedModel and update_bn) are in package optim/swa, beside
// [NewSWALR] here.
//
// A training step is
//
//	vram.Tidy(func() {
//		loss := nn.MSELoss(model.Forward(x), y)
//		loss.Backward()
//		optim.ClipGradNorm(model.Parameters(), 1.0) // optional
//		opt.Step()
//		opt.ZeroGrad()
//	})
//
// # Parameter groups
//
// [NewSGD], [NewAdam], [NewAdamW], [NewRMSprop], [NewAdagrad],
// [NewAdamax], [NewNAdam], [NewRAdam], [NewAdadelta], [NewASGD] and
// [NewRprop] put their parameters in one group. [NewSGDGroups], [NewAdamGroups],
// [NewAdamWGroups], [NewRMSpropGroups], [NewAdagradGroups] and the other
// optimizers' ...Groups constructors take several, each
// a [ParamGroup] whose Options ([WithLR], [WithWeightDecay], [WithBetas],
// ...) override the defaults given in the config, as the dicts of
// torch.optim.SGD([{'params': ...}, {'params': ..., 'lr': ...}], lr=...)
// do; AddParamGroup adds one later. A parameter may be in one group only;
// parameters that do not require grad are accepted, as in PyTorch, and
// skipped while they have no gradient. Errors match vram.ErrArgument (or
// vram.ErrReleased, vram.ErrDType) under errors.Is. Step panics with an
// *vram.Error of kind vram.ErrDevice, before it changes anything, when a
// gradient is on another device than its parameter (moved on its own,
// with Grad().MoveTo).
//
// # Memory
//
// Step updates the parameters in place, so models and other holders of the
// tensors see the new values; it runs under [vram.NoGrad] and [vram.Tidy],
// so it records nothing and leaves no temporaries. The optimizer's state
// (momentum buffers, moment estimates) is created on the first Step that
// sees a parameter's gradient, on that parameter's device and in its dtype,
// and is exempt from the caller's Tidy; when a parameter has moved to
// another device since (nn.Module.To), its state follows it at the next
// Step. Each optimizer's Release method (or [Release], for one held as an
// [Optimizer]) frees the state.
//
// A step captured into a graph (vram.CaptureGraph) replays with the
// hyper-parameters it had during the capture. Steps that would replay
// otherwise than they ran are refused during a capture with an error
// wrapping vram.ErrCapturing, before anything changes: a parameter's first
// step, which makes the optimizer's state (warm up before capturing), and
// every step of the optimizers whose step count lives on the host (Adam,
// AdamW, Adamax, NAdam, RAdam, ASGD, and Adagrad with LRDecay). SGD,
// RMSprop, Adadelta, Rprop and Adagrad without LRDecay replay exactly as
// they run; the step counts they keep for checkpoints count the captured
// step once, not its replays.
//
// Optimizers are not safe for concurrent use.
package optim
