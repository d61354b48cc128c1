// Package models holds ready-made networks built from package nn, with the
// layout and the state-dict names of their PyTorch reference
// implementations, so that weights move between the two with
// safetensors files ([nn.Save], [nn.Load]):
//
//   - [ResNet18], [ResNet34], [ResNet50] and [ResNet101]: torchvision's
//     ResNets ([BasicBlock], [Bottleneck]), with a [Config] for the number
//     of classes and zero-initialised residual branches.
//
// Loading torchvision's pretrained weights takes one file written in
// Python:
//
//	# Python
//	from safetensors.torch import save_file
//	save_file(torchvision.models.resnet50(weights="DEFAULT").state_dict(), "resnet50.safetensors")
//
//	// Go
//	model := models.ResNet50(models.Config{}, vram.CUDA(0))
//	if err := nn.Load(model, "resnet50.safetensors"); err != nil { ... }
//	model.Eval()
//
// The layouts are checked against torchvision's state dicts, and
// ResNet-18's outputs against torchvision's on the same weights and input
// (recorded by testdata/torchvision_resnet.py with torchvision 0.14): they
// agree to 1.5e-6 of the largest logit in evaluation mode and 5e-5 in
// training mode on the CPU.
//
// The models take a device, dtype and generator like every nn constructor,
// train under amp.Autocast (batch norm stays float32) and run in either
// memory format: nn.ToMemoryFormat(model, vram.ChannelsLast) and a
// channels-last input give the layout the fastest GPU convolutions read.
package models
