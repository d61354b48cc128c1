package cudnn

import (
	"errors"
	"slices"
	"testing"
	"unsafe"

	"github.com/vramgo/vram/native/internal/cudatest"
)

// TestGraphAttributesGPU sets the attributes of a tensor and a
// convolution descriptor of the graph API, finalizes them and reads them
// back: a wrong attribute name or type would fail here with cuDNN's
// status, or read back other values. An attribute of the wrong type must
// be refused with a bad-parameter status, or else taken (logged).
func TestGraphAttributesGPU(t *testing.T) {
	devs := cudatest.Require(t)
	if _, err := Load(); err != nil {
		cudatest.SkipOrFail(t, "no cuDNN 9: %v", err)
	}
	ctx := cudatest.Context(t, devs[0])
	err := ctx.Do(func() error {
		td, err := BackendCreateDescriptor(DescTensor)
		if err != nil {
			t.Fatalf("create tensor: %v", err)
		}
		defer BackendDestroyDescriptor(td)
		dims, strides := []int64{2, 16, 5, 7}, []int64{16 * 35, 1, 7 * 16, 16} // NHWC
		for i, err := range []error{
			SetAttrDataType(td, AttrTensorDataType, DataBFloat16),
			SetAttrInt64s(td, AttrTensorDimensions, dims...),
			SetAttrInt64s(td, AttrTensorStrides, strides...),
			SetAttrInt64s(td, AttrTensorUniqueID, 42),
			SetAttrInt64s(td, AttrTensorByteAlignment, 16),
			BackendFinalize(td),
		} {
			if err != nil {
				t.Fatalf("tensor step %d: %v", i+1, err)
			}
		}
		got := make([]int64, 8)
		n, err := BackendGetAttribute(td, AttrTensorDimensions, TypeInt64, int64(len(got)), unsafe.Pointer(&got[0]))
		if err != nil || !slices.Equal(got[:n], dims) {
			t.Errorf("dimensions read back: %v (%d), %v; want %v", got[:max(n, 0)], n, err, dims)
		}
		n, err = BackendGetAttribute(td, AttrTensorStrides, TypeInt64, int64(len(got)), unsafe.Pointer(&got[0]))
		if err != nil || !slices.Equal(got[:n], strides) {
			t.Errorf("strides read back: %v (%d), %v; want %v", got[:max(n, 0)], n, err, strides)
		}
		if uid, err := GetAttrInt64(td, AttrTensorUniqueID); err != nil || uid != 42 {
			t.Errorf("unique id read back: %d, %v; want 42", uid, err)
		}
		var dt DataType
		if _, err := BackendGetAttribute(td, AttrTensorDataType, TypeDataType, 1, unsafe.Pointer(&dt)); err != nil || dt != DataBFloat16 {
			t.Errorf("data type read back: %d, %v; want %d (CUDNN_DATA_BFLOAT16)", dt, err, DataBFloat16)
		}

		cd, err := BackendCreateDescriptor(DescConvolution)
		if err != nil {
			t.Fatalf("create convolution: %v", err)
		}
		defer BackendDestroyDescriptor(cd)
		for i, err := range []error{
			SetAttrInt64s(cd, AttrConvolutionSpatialDims, 2),
			SetAttrDataType(cd, AttrConvolutionCompType, DataFloat),
			SetAttrConvMode(cd, AttrConvolutionConvMode, CrossCorrelation),
			SetAttrInt64s(cd, AttrConvolutionDilations, 1, 2),
			SetAttrInt64s(cd, AttrConvolutionFilterStrides, 2, 1),
			SetAttrInt64s(cd, AttrConvolutionPrePaddings, 1, 0),
			SetAttrInt64s(cd, AttrConvolutionPostPaddings, 1, 0),
			BackendFinalize(cd),
		} {
			if err != nil {
				t.Fatalf("convolution step %d: %v", i+1, err)
			}
		}
		n, err = BackendGetAttribute(cd, AttrConvolutionDilations, TypeInt64, int64(len(got)), unsafe.Pointer(&got[0]))
		if err != nil || !slices.Equal(got[:n], []int64{1, 2}) {
			t.Errorf("dilations read back: %v, %v; want [1 2]", got[:max(n, 0)], err)
		}

		// The wrong attribute type is refused, not misread.
		bad, err := BackendCreateDescriptor(DescTensor)
		if err != nil {
			t.Fatalf("create tensor: %v", err)
		}
		defer BackendDestroyDescriptor(bad)
		d32 := []int32{2, 3, 4, 5}
		err = BackendSetAttribute(bad, AttrTensorDimensions, TypeInt32, 4, unsafe.Pointer(&d32[0]))
		switch {
		case err == nil:
			t.Logf("this cuDNN takes int32 dimensions too")
		case !errors.Is(err, ErrBadParam) && !errors.Is(err, ErrNotSupported):
			t.Errorf("int32 dimensions: %v, want a bad-parameter status", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
