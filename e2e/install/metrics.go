package install

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Sample is one series of a scrape: its metric name, labels and value.
type Sample struct {
	Name   string
	Labels map[string]string
	Value  float64
}

// Metrics scrapes the process's /metrics (what Prometheus reads through the
// metrics Service and the ServiceMonitor of platform/components/monitoring)
// and returns every sample.
func (o *Operator) Metrics(ctx context.Context) ([]Sample, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	url := fmt.Sprintf("http://127.0.0.1:%d/metrics", o.MetricsPort)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	// The text format: the parser below reads nothing else.
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("platform: scraping the %s operator: %w", o.Name, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return nil, fmt.Errorf("platform: scraping %s: %s: %s", url, resp.Status, b)
	}
	return ParseMetrics(resp.Body)
}

// ParseMetrics reads the Prometheus text exposition format (version 0.0.4):
// one sample a line, `name{label="value",...} value [timestamp]`; comment
// lines are skipped.
func ParseMetrics(r io.Reader) ([]Sample, error) {
	var out []Sample
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		s, err := parseSample(line)
		if err != nil {
			return nil, fmt.Errorf("platform: metrics line %d %q: %w", n, line, err)
		}
		out = append(out, s)
	}
	return out, sc.Err()
}

func parseSample(line string) (Sample, error) {
	s := Sample{Labels: map[string]string{}}
	i := strings.IndexAny(line, "{ ")
	if i <= 0 {
		return s, fmt.Errorf("no metric name")
	}
	s.Name, line = line[:i], line[i:]
	if line[0] == '{' {
		line = line[1:]
		for {
			line = strings.TrimLeft(line, " ,")
			if strings.HasPrefix(line, "}") {
				line = line[1:]
				break
			}
			eq := strings.Index(line, "=\"")
			if eq <= 0 {
				return s, fmt.Errorf("bad label")
			}
			name := line[:eq]
			line = line[eq+2:]
			var v strings.Builder
			closed := false
			for j := 0; j < len(line); j++ {
				c := line[j]
				switch {
				case c == '\\' && j+1 < len(line):
					j++
					switch line[j] {
					case 'n':
						v.WriteByte('\n')
					default:
						v.WriteByte(line[j])
					}
				case c == '"':
					line, closed = line[j+1:], true
				default:
					v.WriteByte(c)
				}
				if closed {
					break
				}
			}
			if !closed {
				return s, fmt.Errorf("unterminated label value")
			}
			s.Labels[name] = v.String()
		}
	}
	fields := strings.Fields(line)
	if len(fields) == 0 {
		return s, fmt.Errorf("no value")
	}
	v, err := strconv.ParseFloat(fields[0], 64) // also +Inf, -Inf, NaN
	if err != nil {
		return s, err
	}
	s.Value = v
	return s, nil
}

// Find returns the value of the one sample named name whose labels include
// labels, and whether there is one.
func Find(samples []Sample, name string, labels map[string]string) (float64, bool) {
next:
	for _, s := range samples {
		if s.Name != name {
			continue
		}
		for k, v := range labels {
			if s.Labels[k] != v {
				continue next
			}
		}
		return s.Value, true
	}
	return 0, false
}
