package status

import "testing"

type code int32

func TestName(t *testing.T) {
	names := map[code]string{0: "X_SUCCESS", 2: "X_ERROR_OUT_OF_MEMORY"}
	tests := []struct {
		c    code
		want string
	}{
		{0, "X_SUCCESS"},
		{2, "X_ERROR_OUT_OF_MEMORY"},
		{12345, "X_ERROR_12345"},
		{-1, "X_ERROR_-1"},
	}
	for _, tc := range tests {
		if got := Name(names, "X_ERROR_", tc.c); got != tc.want {
			t.Errorf("Name(%d) = %q, want %q", tc.c, got, tc.want)
		}
	}
}

func TestMessage(t *testing.T) {
	tests := []struct {
		pkg, fn, name string
		code          int32
		desc, want    string
	}{
		{"cuda", "cuMemAlloc_v2", "CUDA_ERROR_OUT_OF_MEMORY", 2, "out of memory",
			"cuda: cuMemAlloc_v2: CUDA_ERROR_OUT_OF_MEMORY (2): out of memory"},
		{"cublas", "cublasLtMatmul", "CUBLAS_STATUS_NOT_SUPPORTED", 15, "",
			"cublas: cublasLtMatmul: CUBLAS_STATUS_NOT_SUPPORTED (15)"},
		{"nvml", "", "NVML_ERROR_UNKNOWN", 999, "",
			"nvml: NVML_ERROR_UNKNOWN (999)"},
		{"nvrtc", "", "NVRTC_ERROR_5", -5, "d",
			"nvrtc: NVRTC_ERROR_5 (-5): d"},
	}
	for _, tc := range tests {
		if got := Message(tc.pkg, tc.fn, tc.name, tc.code, tc.desc); got != tc.want {
			t.Errorf("Message = %q, want %q", got, tc.want)
		}
	}
}
