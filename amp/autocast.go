package amp

import "github.com/vramgo/vram"

// Autocast runs fn with automatic mixed precision in dt (vram.Float16 or
// vram.BFloat16) on the calling goroutine, like torch.autocast; the package
// documentation lists which ops run in dt and which in float32. Goroutines
// started inside fn do not inherit it. Regions nest, the innermost winning;
// [NoAutocast] suspends a region for a block.
// It panics with an *vram.Error of kind vram.ErrDType for another dtype.
func Autocast(dt vram.DType, fn func()) { vram.Autocast(dt, fn) }

// Enabled reports whether the calling goroutine is inside an Autocast
// region, and its dtype.
func Enabled() (vram.DType, bool) { return vram.AutocastDType() }

// NoAutocast runs fn with the calling goroutine's Autocast region
// suspended, like torch.autocast(device_type, enabled=False) inside an
// enabled region: ops run in their inputs' dtypes, so the block casts its
// inputs as it needs; the region's policy resumes when fn returns.
func NoAutocast(fn func()) { vram.NoAutocast(fn) }
