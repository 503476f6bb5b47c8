package cli

import (
	"testing"

	"cairn.dev/agent/internal/config"
	"cairn.dev/agent/internal/store"
)

// The runtime's soft memory limit holds every part in flight: one stream
// keeps its limit (32 MiB + the S3 part size), each further part adds its
// encoder and its S3 part buffer. A limit below a parallel backup's live
// heap made the collector run without pause (~18 % of the CPU, measured).
func TestMemoryLimitCoversEveryPartInFlight(t *testing.T) {
	const mib = 1 << 20
	s3 := func(par int) *config.Config {
		return &config.Config{Store: "s3", Parallelism: par, S3: store.S3Config{PartSize: 16 * mib}}
	}
	for _, c := range []struct {
		name string
		cfg  *config.Config
		want int64
	}{
		{"one stream to S3", s3(1), 32*mib + 16*mib},
		{"parallelism unset", s3(0), 32*mib + 16*mib},
		{"two parts to S3", s3(2), 24*mib + 2*(8*mib+16*mib)},
		{"eight parts to S3", s3(8), 24*mib + 8*(8*mib+16*mib)},
		{"one stream to a PVC", &config.Config{Store: "pvc", Parallelism: 1}, 32 * mib},
		{"four parts to a PVC", &config.Config{Store: "pvc", Parallelism: 4}, 24*mib + 4*8*mib},
	} {
		if got := memoryLimit(c.cfg); got != c.want {
			t.Errorf("%s: limit %d MiB, want %d MiB", c.name, got/mib, c.want/mib)
		}
	}
}
