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
// The models take a device, dtype and generator like every nn constructor,
// train under amp.Autocast (batch norm stays float32) and run in either
// memory format: nn.ToMemoryFormat(model, vram.ChannelsLast) and a
// channels-last input give the layout the fastest GPU convolutions read.
package models
