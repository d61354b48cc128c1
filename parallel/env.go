package parallel

import (
	"net"
	"os"
	"strconv"
	"strings"

	"github.com/vramgo/vram"
)

// The environment variables of a distributed job: torchrun's, which
// "vram run" sets for each rank it starts, plus one of vram's own.
const (
	EnvRank           = "RANK"             // the process's rank in the job, from 0
	EnvLocalRank      = "LOCAL_RANK"       // its rank on its node
	EnvWorldSize      = "WORLD_SIZE"       // the number of ranks in the job
	EnvLocalWorldSize = "LOCAL_WORLD_SIZE" // the number of ranks on its node
	EnvGroupRank      = "GROUP_RANK"       // the node's rank (torchrun's name)
	EnvMasterAddr     = "MASTER_ADDR"      // the host of the rendezvous store
	EnvMasterPort     = "MASTER_PORT"      // its port
	// EnvAgentStore, when true, says that the launcher serves the
	// rendezvous store (as "vram run" does), so rank 0 does not.
	EnvAgentStore = "VRAM_AGENT_STORE"
)

// LaunchInfo is what a launcher told a process about its place in a
// distributed job. The zero value, and what [LaunchEnv] returns for a
// process started without a launcher, is a job of one rank.
type LaunchInfo struct {
	Rank           int    // this process's rank, 0 to WorldSize-1
	WorldSize      int    // the number of ranks; 0 means 1
	LocalRank      int    // this process's rank on its node (the GPU index to use)
	LocalWorldSize int    // the number of ranks on this node; 0 means WorldSize
	GroupRank      int    // this node's rank
	MasterAddr     string // the host of the rendezvous store ("" for one rank)
	MasterPort     int    // its port
	// AgentStore is true when the launcher serves the store; otherwise
	// rank 0 serves it at MasterAddr:MasterPort.
	AgentStore bool
	// Launched is true when the variables were set, false for a process
	// started on its own.
	Launched bool
}

// Size returns the number of ranks: WorldSize, or 1 for the zero value.
func (l LaunchInfo) Size() int { return max(l.WorldSize, 1) }

// MasterHostPort returns "MasterAddr:MasterPort".
func (l LaunchInfo) MasterHostPort() string {
	return joinHostPort(l.MasterAddr, l.MasterPort)
}

func joinHostPort(host string, port int) string {
	if strings.Contains(host, ":") && !strings.HasPrefix(host, "[") {
		host = "[" + host + "]"
	}
	return host + ":" + strconv.Itoa(port)
}

// LaunchEnv reads the variables of a distributed job from the process's
// environment (see [LaunchEnvFromLookup]). It is the one place where
// package parallel reads the environment.
func LaunchEnv() (LaunchInfo, error) { return LaunchEnvFromLookup(os.LookupEnv) }

// LaunchEnvFromLookup reads the variables of a distributed job through
// lookup (os.LookupEnv, or a map in tests): RANK and WORLD_SIZE, then
// LOCAL_RANK and LOCAL_WORLD_SIZE (on one node they default to RANK and
// WORLD_SIZE), GROUP_RANK (default RANK / LOCAL_WORLD_SIZE), and, for more
// than one rank, MASTER_ADDR and MASTER_PORT, as "vram run" and torchrun
// set them (MASTER_ADDR a host alone, without port or scheme), and
// VRAM_AGENT_STORE. Without RANK and WORLD_SIZE the process
// is a job of one rank (Launched false). A value that is missing, not a
// number or out of range is an error naming the variable, wrapping
// vram.ErrArgument.
func LaunchEnvFromLookup(lookup func(string) (string, bool)) (LaunchInfo, error) {
	if lookup == nil {
		return LaunchInfo{}, errorf("parallel: LaunchEnvFromLookup: nil lookup function: %w", vram.ErrArgument)
	}
	_, hasRank := lookup(EnvRank)
	_, hasSize := lookup(EnvWorldSize)
	switch {
	case !hasRank && !hasSize:
		return LaunchInfo{WorldSize: 1, LocalWorldSize: 1}, nil
	case !hasRank:
		return LaunchInfo{}, errorf("parallel: %s is set but %s is not; a launcher such as vram run sets both: %w", EnvWorldSize, EnvRank, vram.ErrArgument)
	case !hasSize:
		return LaunchInfo{}, errorf("parallel: %s is set but %s is not; a launcher such as vram run sets both: %w", EnvRank, EnvWorldSize, vram.ErrArgument)
	}
	l := LaunchInfo{Launched: true}
	var err error
	num := func(name string, lo, hi int, def *int) int {
		if err != nil {
			return 0
		}
		v, ok := lookup(name)
		if !ok {
			if def != nil {
				return *def
			}
			err = errorf("parallel: %s is not set (a launcher such as vram run sets it): %w", name, vram.ErrArgument)
			return 0
		}
		n, perr := strconv.Atoi(v)
		switch {
		case perr != nil:
			err = errorf("parallel: %s=%q is not a whole number: %w", name, v, vram.ErrArgument)
		case n < lo || n > hi:
			err = errorf("parallel: %s=%d is out of range (%d to %d): %w", name, n, lo, hi, vram.ErrArgument)
		}
		return n
	}
	const maxRanks = 1 << 20
	l.WorldSize = num(EnvWorldSize, 1, maxRanks, nil)
	l.Rank = num(EnvRank, 0, l.WorldSize-1, nil)
	_, hasLocalSize := lookup(EnvLocalWorldSize)
	l.LocalWorldSize = num(EnvLocalWorldSize, 1, l.WorldSize, &l.WorldSize)
	var defLocal *int
	if !hasLocalSize {
		defLocal = &l.Rank // one node: the local rank is the rank
	}
	l.LocalRank = num(EnvLocalRank, 0, l.LocalWorldSize-1, defLocal)
	if err == nil {
		group := l.Rank / l.LocalWorldSize
		l.GroupRank = num(EnvGroupRank, 0, maxRanks, &group)
	}
	if err != nil {
		return LaunchInfo{}, err
	}
	addr, hasAddr := lookup(EnvMasterAddr)
	l.MasterAddr = strings.TrimSpace(addr)
	if _, hasPort := lookup(EnvMasterPort); hasPort || l.WorldSize > 1 {
		l.MasterPort = num(EnvMasterPort, 1, 65535, nil)
		if err != nil {
			return LaunchInfo{}, err
		}
	}
	if l.WorldSize > 1 && (!hasAddr || l.MasterAddr == "") {
		return LaunchInfo{}, errorf("parallel: %s is not set; a job of %d ranks needs the host of its rendezvous store: %w", EnvMasterAddr, l.WorldSize, vram.ErrArgument)
	}
	if l.MasterAddr != "" {
		if err := checkMasterAddr(l.MasterAddr); err != nil {
			return LaunchInfo{}, err
		}
	}
	if v, ok := lookup(EnvAgentStore); ok {
		b, perr := strconv.ParseBool(v)
		if perr != nil {
			return LaunchInfo{}, errorf("parallel: %s=%q is not a boolean (1 or 0): %w", EnvAgentStore, v, vram.ErrArgument)
		}
		l.AgentStore = b
	}
	return l, nil
}

// checkMasterAddr returns an error wrapping vram.ErrArgument unless addr
// is a host name or IP address alone, as MASTER_ADDR is: with a port, a
// scheme or a space it names no host, and the ranks would try to reach it
// until their timeout.
func checkMasterAddr(addr string) error {
	bad := func(why string) error {
		return errorf("parallel: %s=%q %s; it is a host name or IP address alone, and the port goes in %s: %w",
			EnvMasterAddr, addr, why, EnvMasterPort, vram.ErrArgument)
	}
	switch {
	case strings.Contains(addr, "://"):
		return bad("is a URL")
	case strings.ContainsAny(addr, " \t\r\n/"):
		return bad("is not a host")
	}
	if _, port, err := net.SplitHostPort(addr); err == nil && port != "" {
		return bad("has a port")
	}
	return nil
}

// Environ returns the variables that describe l, as "NAME=value" strings
// for exec.Cmd's Env: what a launcher gives each rank.
func (l LaunchInfo) Environ() []string {
	env := []string{
		EnvRank + "=" + strconv.Itoa(l.Rank),
		EnvLocalRank + "=" + strconv.Itoa(l.LocalRank),
		EnvWorldSize + "=" + strconv.Itoa(l.Size()),
		EnvLocalWorldSize + "=" + strconv.Itoa(max(l.LocalWorldSize, 1)),
		EnvGroupRank + "=" + strconv.Itoa(l.GroupRank),
	}
	if l.MasterAddr != "" {
		env = append(env, EnvMasterAddr+"="+l.MasterAddr)
	}
	if l.MasterPort != 0 {
		env = append(env, EnvMasterPort+"="+strconv.Itoa(l.MasterPort))
	}
	if l.AgentStore {
		env = append(env, EnvAgentStore+"=1")
	}
	return env
}
