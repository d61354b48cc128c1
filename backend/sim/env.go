package sim

import (
	"errors"
	"fmt"
	"strings"
)

// The environment variables the sim backend reads once, at the first use
// of a sim device (VRAM_ALLOC_CONF, read too, belongs to package memory).
const (
	EnvDevices   = "VRAM_SIM_DEVICES"    // how many devices and how large; see [ParseDevices]
	EnvShapeOnly = "VRAM_SIM_SHAPE_ONLY" // whether they keep data; see [ParseShapeOnly]
)

// EnvError reports an invalid value of one of the sim backend's
// environment variables. Its message names the variable, the value and
// what is accepted.
type EnvError struct {
	Var   string // EnvDevices or EnvShapeOnly
	Value string // as set
	Err   error  // what is wrong with it
}

// Error returns VAR="value": reason.
func (e *EnvError) Error() string { return fmt.Sprintf("%s=%q: %v", e.Var, e.Value, e.Err) }

// Unwrap returns the parse error.
func (e *EnvError) Unwrap() error { return e.Err }

// shapeOnlyValues says what VRAM_SIM_SHAPE_ONLY accepts.
const shapeOnlyValues = "want 1, true, yes or on for devices that keep no data; 0, false, no, off or unset for devices that do"

// ParseShapeOnly parses a VRAM_SIM_SHAPE_ONLY value, in any case: "1",
// "true", "yes" and "on" make the sim devices shape-only (they keep no data;
// see [Device.SetShapeOnly]); "", "0", "false", "no" and "off" do not.
// Anything else is an error that lists these.
func ParseShapeOnly(s string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "0", "false", "no", "off":
		return false, nil
	case "1", "true", "yes", "on":
		return true, nil
	}
	return false, errors.New("not a boolean (" + shapeOnlyValues + ")")
}
