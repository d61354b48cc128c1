package parallel

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/vramgo/vram"
)

// The backends of InitProcessGroup.
const (
	BackendAuto = "auto" // NCCL for CUDA devices, TCP otherwise
	BackendNCCL = "nccl"
	BackendTCP  = "tcp"
)

// ProcessGroupOptions says how [InitProcessGroup] joins a job. The zero
// value joins a job of one rank on the CPU, or on cuda:0 with NCCL when
// there is a GPU.
type ProcessGroupOptions struct {
	// Backend is "nccl" (CUDA devices, one or many hosts), "tcp" (CPU and
	// sim devices; for tests and CPU jobs) or "auto" (the default, also
	// for ""): NCCL when Device is a CUDA device, TCP otherwise.
	Backend string
	// Device is this rank's device. The zero value means
	// cuda:LOCAL_RANK when the machine has a GPU and Backend is not "tcp",
	// else the CPU.
	Device vram.Device
	// Launch is this process's place in the job, from [LaunchEnv]; the
	// zero value is a job of one rank.
	Launch LaunchInfo
	// Timeout bounds each collective of the TCP backend (see
	// [TCPOptions]); 0 means DefaultTimeout.
	Timeout time.Duration
	// InitTimeout is how long the ranks wait for each other to join,
	// rendezvous included; 0 means Timeout.
	InitTimeout time.Duration
	// Name names the group in the store, so that several groups of one
	// job (one launcher, one store) keep apart; every rank of a group
	// gives the same. "" means "default".
	Name string
}

// InitProcessGroup joins this process to a group of a distributed job and
// returns its communicator (torch.distributed.init_process_group with
// init_method "env://"). The ranks meet through a rendezvous store at
// MASTER_ADDR:MASTER_PORT, which the launcher serves ("vram run" does, and
// says so with LaunchInfo.AgentStore) or else rank 0 serves for as long as
// its communicator is open. With the NCCL backend rank 0 makes NCCL's
// unique id and shares it through the store; with TCP each rank publishes
// its address there.
//
// Every rank waits at most InitTimeout for the others; a rank that does
// not arrive makes the others fail with a [*RankError] naming it. A job
// of one rank needs no store. Close the communicator when done; that also
// stops the store rank 0 serves. A job of more than one rank needs
// Launch's MasterAddr (a host alone) and MasterPort; without them, or with
// a MasterAddr that has a port or a scheme, InitProcessGroup fails at once
// with vram.ErrArgument.
func InitProcessGroup(opts ProcessGroupOptions) (Communicator, error) {
	l := opts.Launch
	size := l.Size()
	switch {
	case l.Rank < 0 || l.Rank >= size:
		return nil, errorf("parallel: init process group: rank %d out of range for %d ranks: %w", l.Rank, size, vram.ErrArgument)
	case size > 1 && (l.MasterPort < 1 || l.MasterPort > 65535):
		return nil, errorf("parallel: init process group: a job of %d ranks needs the port of its rendezvous store, MasterPort 1 to 65535 (MASTER_PORT), not MasterPort %d; LaunchEnv reads it: %w",
			size, l.MasterPort, vram.ErrArgument)
	case size > 1 && strings.TrimSpace(l.MasterAddr) == "":
		return nil, errorf("parallel: init process group: a job of %d ranks needs the host of its rendezvous store and has no MasterAddr (MASTER_ADDR); LaunchEnv reads it: %w",
			size, vram.ErrArgument)
	}
	if size > 1 {
		if err := checkMasterAddr(l.MasterAddr); err != nil {
			return nil, errorf("parallel: init process group: %w", err)
		}
	}
	backend := strings.ToLower(opts.Backend)
	dev := opts.Device
	if dev == (vram.Device{}) {
		dev = vram.CPU
		if backend != BackendTCP && vram.CUDAAvailable() {
			dev = vram.CUDA(l.LocalRank)
		}
	}
	switch backend {
	case "", BackendAuto:
		backend = BackendTCP
		if dev.IsCUDA() {
			backend = BackendNCCL
		}
	case BackendTCP:
	case BackendNCCL:
		if !dev.IsCUDA() {
			return nil, errorf("parallel: init process group: the nccl backend needs a CUDA device, not %s; use the tcp backend for CPU and sim devices: %w", dev, vram.ErrDevice)
		}
	default:
		return nil, errorf("parallel: init process group: unknown backend %q (want nccl, tcp or auto): %w", opts.Backend, vram.ErrArgument)
	}
	if err := dev.Check(); err != nil {
		return nil, errorf("parallel: init process group: rank %d: %w", l.Rank, err)
	}
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	initTimeout := opts.InitTimeout
	if initTimeout <= 0 {
		initTimeout = timeout
	}
	name := opts.Name
	if name == "" {
		name = "default"
	}
	if err := checkKey(name); err != nil || strings.Contains(name, "/") {
		return nil, errorf("parallel: init process group: group name %q: want 1 to 1000 bytes without a slash: %w", name, vram.ErrArgument)
	}
	prefix := "pg/" + name

	if size == 1 {
		if backend == BackendNCCL {
			id, err := NewNCCLID()
			if err != nil {
				return nil, errorf("parallel: init process group: %w", err)
			}
			return NewNCCLRank(0, 1, dev, id)
		}
		return NewTCPRank(context.Background(), nil, 0, 1, dev, TCPOptions{Timeout: timeout})
	}

	ctx, cancel := context.WithTimeout(context.Background(), initTimeout)
	defer cancel()
	g := &group{}
	if l.Rank == 0 && !l.AgentStore {
		srv, err := ListenStore(storeListenAddr(l.MasterAddr, l.MasterPort))
		if err != nil {
			return nil, errorf("parallel: init process group: rank 0 serves the rendezvous store: %w", err)
		}
		g.server = srv
	}
	store, err := DialStore(ctx, l.MasterHostPort(), StoreOptions{Timeout: initTimeout})
	if err != nil {
		g.close()
		return nil, errorf("parallel: init process group: rank %d: %w", l.Rank, err)
	}
	g.store = store
	join, err := rendezvous(ctx, store, prefix, l.Rank, size, initTimeout)
	if join != "" {
		g.left = join + "/left/" + strconv.Itoa(l.Rank)
	}
	if err != nil {
		if g.server != nil {
			time.Sleep(timeoutGrace(initTimeout))
		}
		g.close()
		return nil, err
	}
	prefix = join
	switch backend {
	case BackendTCP:
		g.Communicator, err = NewTCPRank(ctx, store, l.Rank, size, dev, TCPOptions{Timeout: timeout, InitTimeout: initTimeout, Prefix: prefix + "/tcp"})
	default:
		g.Communicator, err = joinNCCL(ctx, store, prefix, l.Rank, size, dev, initTimeout)
	}
	if err != nil {
		if g.server != nil {
			// The other ranks may still wait for an answer of the store
			// that names the rank missing; give it time to come.
			time.Sleep(timeoutGrace(initTimeout))
		}
		g.close()
		return nil, err
	}
	return g, nil
}

// rendezvous begins this rank's join of the group whose keys are under
// prefix, and returns the prefix of the keys of this join (also with an
// error, once the join has its number: the caller marks it left).
//
// The store may outlive the group: "vram run" serves one for the whole
// job, and a program may close its group and join it again (as
// torch.distributed allows init_process_group after
// destroy_process_group). So each rank counts its joins in the store, and
// the n-th join of every rank meets under keys of its own, whatever order
// the ranks come in, never reading what the join before left there. A
// rank's join before must have been left (closed, or failed): otherwise
// this one is refused at once, and gives its number back, since another
// process of the rank, or this one, still holds the group.
//
// Every rank then publishes its world size and waits for every other
// rank's, so that a rank missing is named here. A rank whose size is not
// rank 0's fails as soon as rank 0 arrives; rank 0 compares every rank's
// with its own and tells the others what it found, so that ranks started
// with different sizes fail with [ErrMismatch] rather than wait for ranks
// that will never come. The messages of rank 0's verdict name the rank
// that disagrees; an empty verdict says that every rank agrees.
func rendezvous(ctx context.Context, store *Store, prefix string, rank, size int, initTimeout time.Duration) (string, error) {
	failErr := func(err error) error {
		return errorf("parallel: init process group: rank %d: %w", rank, err)
	}
	fail := func(err error) (string, error) { return "", failErr(err) }
	n, err := store.Add(ctx, prefix+"/joins/"+strconv.Itoa(rank), 1)
	if err != nil {
		return fail(err)
	}
	join := prefix + "/" + strconv.FormatInt(n, 10)
	if n > 1 {
		left, err := store.Check(ctx, prefix+"/"+strconv.FormatInt(n-1, 10)+"/left/"+strconv.Itoa(rank))
		if err != nil {
			return join, failErr(err)
		}
		if !left {
			if _, err := store.Add(ctx, prefix+"/joins/"+strconv.Itoa(rank), -1); err != nil {
				return fail(err)
			}
			return fail(errorf("rank %d joined this group before and that join is not closed: two processes were started with RANK=%d, "+
				"or this process joins again without closing the group first: %w", rank, rank, vram.ErrArgument))
		}
	}
	sizes, verdictKey := join+"/size/", join+"/sizes"
	want := strconv.Itoa(size)
	if err := store.Set(ctx, sizes+strconv.Itoa(rank), []byte(want)); err != nil {
		return join, failErr(err)
	}
	mismatch := func(msg string, other int) error {
		return &RankError{Op: "init", Rank: other, Err: failed(msg, ErrMismatch)}
	}
	disagree := func(other int, theirs []byte) string {
		return fmt.Sprintf("was started with a world size of %s, rank %d with %d: every rank of a job needs the same WORLD_SIZE",
			theirs, rank, size)
	}
	if rank != 0 {
		b, err := store.Get(ctx, sizes+"0")
		var te *StoreTimeoutError
		if errors.As(err, &te) {
			msg := fmt.Sprintf("did not join within %v", initTimeout)
			if n > 1 {
				msg += fmt.Sprintf(" (this is rank %d's join number %d of the group: if rank 0 has not joined it as often, or two processes were started with RANK=%d, they cannot meet)", rank, n, rank)
			}
			return join, &RankError{Op: "init", Rank: 0, Err: failed(msg, ErrTimeout)}
		}
		if err != nil {
			return join, failErr(err)
		}
		if string(b) != want {
			return join, mismatch(disagree(0, b), 0)
		}
	}
	if err := waitRanks(ctx, store, sizes, rank, size, initTimeout); err != nil {
		return join, err
	}
	if rank != 0 {
		b, err := store.Get(ctx, verdictKey)
		if err != nil {
			return join, failErr(err)
		}
		if len(b) > 0 {
			// "r text": rank r's size is not rank 0's.
			r, msg, _ := strings.Cut(string(b), " ")
			other, err := strconv.Atoi(r)
			if err != nil || other < 0 || other >= size {
				other = -1
			}
			return join, mismatch(msg, other)
		}
		return join, nil
	}
	verdict := ""
	var refused error
	for r := 1; r < size && refused == nil; r++ {
		b, err := store.Get(ctx, sizes+strconv.Itoa(r))
		if err != nil {
			return join, failErr(err)
		}
		if string(b) != want {
			verdict = strconv.Itoa(r) + " " + disagree(r, b)
			refused = mismatch(disagree(r, b), r)
		}
	}
	if err := store.Set(ctx, verdictKey, []byte(verdict)); err != nil {
		return join, failErr(err)
	}
	if refused != nil {
		return join, refused
	}
	return join, nil
}

// joinNCCL shares rank 0's NCCL unique id through the store, waits for
// every rank to arrive (NCCL's own init would wait for ever) and creates
// this rank's NCCL communicator.
func joinNCCL(ctx context.Context, store *Store, prefix string, rank, size int, dev vram.Device, initTimeout time.Duration) (Communicator, error) {
	idKey := prefix + "/nccl/id"
	if rank == 0 {
		id, err := NewNCCLID()
		if err != nil {
			return nil, errorf("parallel: init process group: %w", err)
		}
		if err := store.Set(ctx, idKey, id[:]); err != nil {
			return nil, errorf("parallel: init process group: rank 0: %w", err)
		}
	}
	if err := arrive(ctx, store, prefix+"/nccl/arrived/", rank, size, initTimeout); err != nil {
		return nil, err
	}
	b, err := store.Get(ctx, idKey)
	if err != nil {
		return nil, errorf("parallel: init process group: rank %d: %w", rank, err)
	}
	var id [128]byte
	if len(b) != len(id) {
		return nil, errorf("parallel: init process group: rank %d: the store's %q holds %d bytes, not NCCL's unique id of %d", rank, idKey, len(b), len(id))
	}
	copy(id[:], b)
	return NewNCCLRank(rank, size, dev, id)
}

// arrive sets this rank's key under prefix and waits for every rank's,
// returning a [*RankError] that names the ranks missing at the timeout.
func arrive(ctx context.Context, store *Store, prefix string, rank, size int, initTimeout time.Duration) error {
	if err := store.Set(ctx, prefix+strconv.Itoa(rank), []byte{1}); err != nil {
		return errorf("parallel: init process group: rank %d: %w", rank, err)
	}
	return waitRanks(ctx, store, prefix, rank, size, initTimeout)
}

// waitRanks waits for the key of every rank under prefix, returning a
// [*RankError] that names the ranks missing at the timeout.
func waitRanks(ctx context.Context, store *Store, prefix string, rank, size int, initTimeout time.Duration) error {
	keys := make([]string, size)
	for r := range keys {
		keys[r] = prefix + strconv.Itoa(r)
	}
	err := waitKeys(ctx, store, keys)
	var te *StoreTimeoutError
	if errors.As(err, &te) && len(te.Missing) > 0 {
		var ranks []string
		first := -1
		for _, k := range te.Missing {
			if r, err := strconv.Atoi(strings.TrimPrefix(k, prefix)); err == nil {
				ranks = append(ranks, strconv.Itoa(r))
				if first < 0 {
					first = r
				}
			}
		}
		return &RankError{Op: "init", Rank: first, Err: failed(fmt.Sprintf("%s of %d did not join within %v (ranks missing: %s)",
			plural(te.NumMissing, "rank"), size, initTimeout, strings.Join(ranks, ", ")), ErrTimeout)}
	}
	if err != nil {
		return errorf("parallel: init process group: rank %d: waiting for the other ranks: %w", rank, err)
	}
	return nil
}

// waitKeys waits for every key, in batches of MaxStoreWaitKeys (the most
// one Wait names), so that a job of more ranks than that can meet. At a
// timeout it returns a [*StoreTimeoutError] that counts the keys missing
// in every batch, and lists the first of them: once the time is up, the
// server answers each later batch at once.
func waitKeys(ctx context.Context, store *Store, keys []string) error {
	var timedOut *StoreTimeoutError
	for len(keys) > 0 {
		batch := keys[:min(len(keys), MaxStoreWaitKeys)]
		keys = keys[len(batch):]
		err := store.Wait(ctx, batch...)
		var te *StoreTimeoutError
		switch {
		case err == nil:
		case errors.As(err, &te) && te.NumMissing > 0 && timedOut == nil:
			e := *te
			timedOut = &e
		case errors.As(err, &te) && te.NumMissing > 0:
			timedOut.NumMissing += te.NumMissing
			room := max(maxListedMissing-len(timedOut.Missing), 0)
			timedOut.Missing = append(timedOut.Missing, te.Missing[:min(len(te.Missing), room)]...)
		case timedOut != nil:
			return timedOut // the rest could not be asked about
		default:
			return err
		}
	}
	if timedOut != nil {
		return timedOut
	}
	return nil
}

// storeListenAddr is where rank 0 or a launcher serves the store for
// MASTER_ADDR and MASTER_PORT: on that address when it is a loopback
// address (a job on one machine stays off the network), otherwise on
// every interface, since MASTER_ADDR may name this host in a way that
// does not resolve to one of its interfaces.
func storeListenAddr(host string, port int) string {
	if host == "localhost" {
		return joinHostPort("127.0.0.1", port)
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return joinHostPort(host, port)
	}
	return joinHostPort("", port)
}

// group is a communicator joined by InitProcessGroup, with the store it
// met through (and serves, on rank 0 when no launcher does).
type group struct {
	Communicator
	store  *Store
	server *StoreServer
	left   string // the key that marks this rank's join left
}

// Close closes the communicator, then the store.
func (g *group) Close() error {
	err := g.Communicator.Close()
	g.close()
	return err
}

// close marks this rank's join left, so that it may join again, and
// closes the store.
func (g *group) close() {
	if g.left != "" && g.store != nil {
		ctx, cancel := context.WithTimeout(context.Background(), storeReplySlack)
		g.store.Set(ctx, g.left, nil) // a store gone takes the join's keys with it
		cancel()
		g.left = ""
	}
	if g.store != nil {
		g.store.Close()
	}
	if g.server != nil {
		g.server.Close()
	}
}
