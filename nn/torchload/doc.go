// Package torchload reads PyTorch checkpoints written by torch.save (.pt,
// .pth and pytorch_model.bin files) into vram tensors and models.
//
// The simplest call loads a checkpoint into a model with PyTorch's state-dict
// names, such as torchvision's ResNet-50 weights into models.ResNet50 (package nn/models):
//
//	model := models.ResNet50(models.Config{}, vram.CPU)
//	if _, err := torchload.LoadPyTorch(model, "resnet50.pth", true); err != nil {
//		return err
//	}
//
// [LoadPyTorch] feeds [nn.LoadStateDict], which converts dtypes and, when
// not strict, reports PyTorch's missing and unexpected keys.
// [ReadStateDict] and [ReadStateDictFile] return the tensors themselves,
// in the file's order ([StateDict]).
//
// # The format
//
// Since PyTorch 1.6, torch.save writes a zip archive: a pickle
// (archive/data.pkl) that describes the saved object, one record per
// storage (archive/data/0, archive/data/1, ...), archive/byteorder and
// archive/version. Tensors appear in the pickle as calls of
// torch._utils._rebuild_tensor_v2 on a storage, an offset, a size and a
// stride, inside collections.OrderedDicts. Tensors that share a storage
// (views, tied weights) and tensors that are not contiguous (a transposed
// weight saved as it is) are read with their own values, each into a new
// contiguous tensor. Values of int16, uint8 and uint16, dtypes that vram
// has not, are widened to int32, and those of uint32 and uint64 to int64.
// A tensor of a dtype vram cannot hold (the 8-bit floats such as
// float8_e4m3fn, which PyTorch 2 writes as an UntypedStorage with the
// dtype beside it, complex and quantized dtypes) does not stop the rest of
// the file from loading: [ReadStateDict] gives it with an error of its
// own, and [LoadPyTorch] refuses it only when the model has its key. The legacy format (PyTorch before 1.6, or
// _use_new_zipfile_serialization=False: a row of pickles followed by the
// storages) is read too when written with pickle protocol 2, torch.save's
// default. The tar format of PyTorch before 0.4 and TorchScript archives
// (torch.jit.save) are refused with an error that says how to convert
// them.
//
// # Nested checkpoints
//
// Training scripts often save {"model": state_dict, "optimizer": ...,
// "epoch": 3}. With [Options]' zero value the whole file is taken when it
// is a dict of tensors, else the first key of [DefaultKeys] ("state_dict",
// "model", ...) that holds one; [Options.Key] names another ("model.ema").
// The "module." prefix that DistributedDataParallel and DataParallel add
// to every key, and the "_orig_mod." of a model compiled with
// torch.compile, are removed when every key has them, or a prefix of
// one's choice with [Options.StripPrefix]; a strict load whose file keys
// all start with another prefix that the model's keys lack (the "model."
// of a PyTorch Lightning checkpoint) names the StripPrefix that fits.
//
// # Security
//
// A pickle is a program: torch.load with weights_only=False runs whatever
// functions a file names. torchload runs nothing. It decodes the opcodes of
// pickle protocols 2 to 5 that data needs and accepts only the globals
// that state dicts use (collections.OrderedDict, the tensor, quantized
// tensor and parameter rebuilders of torch._utils, the storage classes,
// dtypes and quantization schemes of package torch, torch.Size, torch.device, _codecs.encode (protocol 2's bytes)
// and the builtins set, frozenset, dict, list and tuple), each turned
// into a Go value; any other global, such as os.system
// or a model's own class, is a [*GlobalError] that names it. A str that is
// not valid UTF-8 is an error too, so that two keys never read as one. The pickle's
// size ([Options.MaxPickleBytes]), its memo, its nesting, every view's
// bounds against its storage's declared size, each record's size against
// the file (and a compressed record's against deflate's largest ratio),
// and the bytes read and built ([Options.MaxBytes]) are checked before
// anything is allocated, so a hostile file gives an error, never a panic,
// a hang or a huge allocation.
//
// # Errors
//
// Every function returns errors; none panics. A file that cannot be read
// as a torch.save state dict gives an error matching vram.ErrArgument, a
// tensor of an unsupported dtype one matching vram.ErrDType when it is
// used, and the errors of
// [nn.LoadStateDict] keep their sentinels.
//
// # Memory ownership
//
// The tensors of a [StateDict] are new CPU tensors that belong to the
// caller: [StateDict.Release] releases them. [LoadPyTorch] builds no
// such tensors: it reads each tensor from the file when the model loads
// it, converting it where the dtypes differ, and skips those the model
// lacks, so that loading a checkpoint takes host memory for about its
// largest tensor beside the model, not three times the checkpoint.
package torchload
