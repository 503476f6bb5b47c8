package soak

import (
	"fmt"
	"math/rand/v2"
	"time"
)

// FaultKind is one kind of fault the soak injects.
type FaultKind string

// The faults of issue 28's soak.
const (
	// KillLeader SIGKILLs the container of the pod holding an operator's
	// Lease; KillStandby the other replica's.
	KillLeader  FaultKind = "kill-operator-leader"
	KillStandby FaultKind = "kill-operator-standby"
	// KillAgentBackup SIGKILLs a backup's agent container while it runs;
	// KillAgentRestore a restore's (the soak's or a verification's).
	KillAgentBackup  FaultKind = "kill-agent-mid-backup"
	KillAgentRestore FaultKind = "kill-agent-mid-restore"
	// RestartAPIServer and RestartEtcd SIGKILL the component and start it
	// again with its command line.
	RestartAPIServer FaultKind = "restart-kube-apiserver"
	RestartEtcd      FaultKind = "restart-etcd"
	// S3Outage makes the S3 server unreachable (connections refused and
	// cut) for S3OutageLength.
	S3Outage FaultKind = "s3-unavailable"
)

// AllFaults lists every kind, in a fixed order (Plan shuffles it).
var AllFaults = []FaultKind{KillLeader, KillStandby, KillAgentBackup, KillAgentRestore, RestartAPIServer, RestartEtcd, S3Outage}

// S3OutageLength is how long S3 stays unreachable.
const S3OutageLength = time.Minute

// MinFaultGap is the least gap between two planned faults (a soak under
// about 100 s; longer ones keep at least 10 s).
const MinFaultGap = 5 * time.Second

// Fault is one scheduled fault.
type Fault struct {
	// At is the offset from the soak's start.
	At   time.Duration
	Kind FaultKind
	// Operator is the operator whose replica KillLeader/KillStandby kill.
	Operator string
}

func (f Fault) String() string {
	s := fmt.Sprintf("+%s %s", f.At.Round(time.Second), f.Kind)
	if f.Operator != "" {
		s += " (" + f.Operator + ")"
	}
	return s
}

// Plan draws the soak's fault schedule from seed, for a soak of length d
// over operators: the first faults are every kind once in a random order
// (so a short soak sees each), then kinds at random, at random gaps
// (uniform around a mean of 10 to 70 s; in a soak too short for every kind
// 10 s apart, such as the 60 s one of `make e2e`, as far apart as they fit,
// at least MinFaultGap) between a lead-in after the start (the first
// backups run unharmed) and a tail before the end (in a long soak the last
// fault, an S3 outage included, is over by then). The same seed gives the
// same schedule.
func Plan(seed int64, d time.Duration, operators []string) []Fault {
	r := rand.New(rand.NewPCG(uint64(seed), uint64(seed)^0x9e3779b97f4a7c15))
	lead, tail := min(time.Minute, d/8), min(S3OutageLength+15*time.Second, d/4)
	window := d - lead - tail
	if window <= 0 || len(operators) == 0 {
		return nil
	}
	gap := max(10*time.Second, min(70*time.Second, window/time.Duration(len(AllFaults))))
	if fit := window / time.Duration(len(AllFaults)-1); gap > fit {
		gap = max(MinFaultGap, fit) // every kind still fits in the window
	}
	kinds := append([]FaultKind{}, AllFaults...)
	r.Shuffle(len(kinds), func(i, j int) { kinds[i], kinds[j] = kinds[j], kinds[i] })
	var out []Fault
	at := lead
	for i := 0; ; i++ {
		if i > 0 {
			if i < len(kinds) {
				at += gap*3/4 + time.Duration(r.Int64N(int64(gap/4)+1)) // every kind fits in the window
			} else {
				at += gap/2 + time.Duration(r.Int64N(int64(gap)+1))
			}
		}
		if at > lead+window {
			return out
		}
		k := AllFaults[r.IntN(len(AllFaults))]
		if i < len(kinds) {
			k = kinds[i]
		}
		f := Fault{At: at, Kind: k}
		if k == KillLeader || k == KillStandby {
			f.Operator = operators[r.IntN(len(operators))]
		}
		out = append(out, f)
	}
}
