package pitr

// Reading what a WAL segment and a base backup's label say.

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// commitLine matches pg_waldump's transaction records with their time.
var commitLine = regexp.MustCompile(`desc: (?:COMMIT|ABORT) (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?) ([A-Za-z]+)`)

// scanWAL reads the commit and abort times of a segment with pg_waldump:
// the first and last, and how many. Records that cross into the segment
// before or after are not seen (pg_waldump reads one file); they only
// make the times a little narrower than the segment's. A segment that
// cannot be read gives zero times (the record then says nothing of its
// times; recovery still replays it).
func scanWAL(ctx context.Context, path string) (first, last time.Time, n int) {
	bin, err := PGTool("pg_waldump")
	if err != nil {
		return
	}
	cmd := exec.CommandContext(ctx, bin, "--rmgr=Transaction", path)
	cmd.Env = []string{"TZ=UTC", "PATH=" + os.Getenv("PATH")}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return
	}
	if cmd.Start() != nil {
		return
	}
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		m := commitLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		t, err := time.Parse("2006-01-02 15:04:05.999999", m[1])
		if err != nil || m[2] != "UTC" {
			continue
		}
		if first.IsZero() {
			first = t
		}
		if t.After(last) {
			last = t
		}
		n++
	}
	_ = cmd.Wait() // pg_waldump ends in an error at the end of the segment's records
	return first, last, n
}

// BackupLabel is what a base backup's backup_label says of its start.
type BackupLabel struct {
	StartLSN  LSN
	File      string
	Timeline  int
	StartTime time.Time
}

var (
	labelStart    = regexp.MustCompile(`(?m)^START WAL LOCATION: ([0-9A-Fa-f]+/[0-9A-Fa-f]+) \(file ([0-9A-F]{24})\)`)
	labelTimeline = regexp.MustCompile(`(?m)^START TIMELINE: (\d+)`)
	labelTime     = regexp.MustCompile(`(?m)^START TIME: (.+)$`)
)

// ParseBackupLabel reads a backup_label.
func ParseBackupLabel(b []byte) (BackupLabel, error) {
	var l BackupLabel
	m := labelStart.FindSubmatch(b)
	if m == nil {
		return l, errors.New("the base backup's stream held no backup_label with its WAL start")
	}
	var err error
	if l.StartLSN, err = ParseLSN(string(m[1])); err != nil {
		return l, err
	}
	l.File = string(m[2])
	l.Timeline, _ = strconv.Atoi(l.File[:8])
	if t := labelTimeline.FindSubmatch(b); t != nil {
		l.Timeline, _ = strconv.Atoi(string(t[1]))
	}
	if t := labelTime.FindSubmatch(b); t != nil {
		if st, err := time.Parse("2006-01-02 15:04:05 MST", strings.TrimSpace(string(t[1]))); err == nil {
			l.StartTime = st.UTC()
		}
	}
	return l, nil
}
