package main

import (
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/klauspost/compress/zstd"

	"cairn.dev/agent/internal/testenv"
)

// encoderCase is one compressor configuration of the encoder comparison.
type encoderCase struct {
	name string
	// cli is a zstd command line (reads the dump on stdin); empty for the
	// Go encoder with opts.
	cli  string
	opts []zstd.EOption
}

func encoderCases() []encoderCase {
	go_ := func(level zstd.EncoderLevel, conc, window int) encoderCase {
		return encoderCase{
			name: fmt.Sprintf("Go %s, concurrency %d, window %d MiB", level, conc, window>>20),
			opts: []zstd.EOption{zstd.WithEncoderLevel(level), zstd.WithEncoderConcurrency(conc),
				zstd.WithWindowSize(window), zstd.WithEncoderCRC(true)},
		}
	}
	return []encoderCase{
		{name: "zstd -3 (CLI, the one-pass pipe's)", cli: "zstd -3 -q -c"},
		{name: "zstd -1 (CLI)", cli: "zstd -1 -q -c"},
		go_(zstd.SpeedDefault, 1, 4<<20), // the agent's default until 2026-12-03
		go_(zstd.SpeedDefault, 2, 4<<20),
		go_(zstd.SpeedDefault, 1, 8<<20),
		go_(zstd.SpeedFastest, 1, 4<<20),
		go_(zstd.SpeedFastest, 2, 4<<20),
		go_(zstd.SpeedFastest, 1, 8<<20),
		go_(zstd.SpeedFastest, 1, 16<<20),
	}
}

// encoders compares compressors on one `pg_dump -Fc -Z0` of a generated
// database of about mb MB: the zstd CLI (the one-pass pipe's compressor)
// against the Go encoder at several levels, concurrencies and windows,
// each fed the way the agent feeds it (the encoder's ReadFrom on a file
// descriptor, its output through SHA-256 to a file). Wall time, CPU time
// (user + system) and output bytes, best of runs; with profileDir, a CPU
// profile of each Go configuration's last run.
func (e *env) encoders(mb, runs int, profileDir string) error {
	db := fmt.Sprintf("bench_enc_%dmb", mb)
	fmt.Fprintf(os.Stderr, "bench: generating %s (~%d MB)\n", db, mb)
	dbBytes, err := generate(e.pg, db, int64(mb)<<20)
	if err != nil {
		return err
	}
	dump := filepath.Join(e.tmp, "encoders.dump")
	defer os.Remove(dump)
	if _, err := e.shell(e.pg.Env(), fmt.Sprintf("%s/pg_dump -Fc -Z0 -d %s > %s", testenv.PGBinDir, db, dump), ""); err != nil {
		return err
	}
	if _, err := e.pg.SQL("postgres", "DROP DATABASE "+db); err != nil {
		return err
	}
	fi, err := os.Stat(dump)
	if err != nil {
		return err
	}
	// Warm the page cache: every case reads the dump from memory.
	if _, err := e.shell(nil, "cat "+dump+" > /dev/null", ""); err != nil {
		return err
	}
	cases := encoderCases()
	best := make([]measurement, len(cases))
	for r := range runs {
		for i, c := range cases {
			var m measurement
			if c.cli != "" {
				out := e.out()
				m, err = e.shell(nil, fmt.Sprintf("%s < %s > %s", c.cli, dump, out), out)
			} else {
				prof := ""
				if profileDir != "" && r == runs-1 {
					prof = filepath.Join(profileDir, "encoder-"+strings.NewReplacer(" ", "", ",", "-").Replace(c.name)+".pprof")
				}
				m, err = goEncode(dump, e.out(), c.opts, prof)
			}
			if err != nil {
				return fmt.Errorf("%s: %w", c.name, err)
			}
			if r == 0 || m.elapsed < best[i].elapsed {
				best[i] = m
			}
		}
	}
	fmt.Printf("Encoders on one pg_dump -Fc -Z0 of a %.0f MB database (%.0f MB dump), best of %d; load average %s\n\n",
		float64(dbBytes)/1e6, float64(fi.Size())/1e6, runs, loadAvg())
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 1, ' ', tabwriter.Debug)
	fmt.Fprintln(tw, "| compressor\t time (s)\t MB/s (dump)\t CPU s\t output (MB)\t vs zstd -3 output\t")
	fmt.Fprintln(tw, "|---\t---\t---\t---\t---\t---\t")
	for i, c := range cases {
		m := best[i]
		fmt.Fprintf(tw, "| %s\t %.2f\t %.1f\t %.2f\t %.2f\t %+.2f %%\t\n", c.name, m.elapsed.Seconds(), mbps(fi.Size(), m.elapsed),
			m.cpu.Seconds(), float64(m.outBytes)/1e6, 100*(float64(m.outBytes)/float64(best[0].outBytes)-1))
	}
	tw.Flush()
	fmt.Println()
	return nil
}

// goEncode compresses in to out with the Go encoder as the agent does, and
// measures it (CPU: this process' user + system time over the run).
func goEncode(in, out string, opts []zstd.EOption, profile string) (measurement, error) {
	f, err := os.Open(in)
	if err != nil {
		return measurement{}, err
	}
	defer f.Close()
	o, err := os.Create(out)
	if err != nil {
		return measurement{}, err
	}
	defer os.Remove(out)
	defer o.Close()
	if profile != "" {
		pf, err := os.Create(profile)
		if err != nil {
			return measurement{}, err
		}
		defer pf.Close()
		if err := pprof.StartCPUProfile(pf); err != nil {
			return measurement{}, err
		}
		defer pprof.StopCPUProfile()
	}
	cpu0 := selfCPU()
	start := time.Now()
	h := sha256.New()
	cw := &countWriter{w: io.MultiWriter(o, h)}
	enc, err := zstd.NewWriter(cw, opts...)
	if err != nil {
		return measurement{}, err
	}
	if _, err := io.Copy(enc, f); err != nil {
		return measurement{}, err
	}
	if err := enc.Close(); err != nil {
		return measurement{}, err
	}
	_ = h.Sum(nil)
	return measurement{elapsed: time.Since(start), cpu: selfCPU() - cpu0, outBytes: cw.n}, nil
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

func selfCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
