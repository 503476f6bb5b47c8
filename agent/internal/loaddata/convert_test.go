package loaddata

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

func TestConverter(t *testing.T) {
	header, hexCols := []byte("INSERT INTO `t` VALUES"), []bool{false, false, true}
	for _, tc := range []struct{ in, want string }{
		{"(1,'a',0x00FF);", "1\ta\t00FF\n"},
		{"\n(1,'a\tb',''),\n(-2.5e3,NULL,NULL);\nINSERT INTO `t` VALUES (3,'x',0xab);\n", "1\ta\\tb\t\n-2.5e3\t\\N\t\\N\n3\tx\tab\n"},
		{`(1,'\0\'\"\b\n\r\t\Z\\',0x);`, "1\t\\0'\"\\b\\n\\r\\t\\Z\\\\\t\n"},
		{`(1,'\%\_\N\q''x',0x);`, "1\t\\\\%\\\\_Nq'x\t\n"},
		{`(1,'\\N','a\tb\\');`, "1\t\\\\N\t610962" + "5c" + "\n"},
		{`(0x41095C,'NULL','it''s');`, "A\\t\\\\\tNULL\t" + hex.EncodeToString([]byte("it's")) + "\n"},
		{"(1,'a\x00b',0x);", "1\ta\\0b\t\n"},
		{`(1,'''''',0x41),(2,'\\''',0x),(3,'a\'''',0xbeef);`, "1\t''\t41\n2\t\\\\'\t\n3\ta''\tbeef\n"},
	} {
		// Reads of one byte (every byte at the end of what is buffered),
		// of half, and buffers of every size from the header's up.
		for size := len(header) - 2; size < len(header)+len(tc.in); size++ {
			var src io.Reader = strings.NewReader(tc.in)
			switch size {
			case len(header) - 2:
				src = iotest.OneByteReader(src)
			case len(header) - 1:
				src = iotest.HalfReader(src)
			}
			c := New(bufio.NewReaderSize(src, max(size, len(header))), header, hexCols)
			var out bytes.Buffer
			if err := c.Run(&out); err != nil {
				t.Errorf("%q (buffer %d): %v", tc.in, size, err)
				break
			}
			if out.String() != tc.want {
				t.Errorf("%q (buffer %d):\n got %q\nwant %q", tc.in, size, out.String(), tc.want)
				break
			}
		}
	}
	for _, tc := range []struct {
		in  string
		cut bool
	}{
		{"(1,b'01',0x);", false},
		{"(1,_binary 'x',0x);", false},
		{"(1,'a');", false},
		{"(1,'a',0x,4);", false},
		{"(1,'a',5);", false},
		{"(1,'a',0xABC);", false},
		{"(1,'a',0x) ;\nINSERT INTO `u` VALUES (1,'a',0x);", false},
		{"(1,'a',0x00),(2,'b", true},
		{"(1,'a',0x00)", true},
		{"(1,'a\\", true},
	} {
		c := New(bufio.NewReaderSize(strings.NewReader(tc.in), 64), header, hexCols)
		err := c.Run(io.Discard)
		switch {
		case tc.cut && !errors.Is(err, ErrCut):
			t.Errorf("%q: %v, want the part cut", tc.in, err)
		case !tc.cut && !errors.Is(err, ErrNotLoadable):
			t.Errorf("%q: %v, want not loadable", tc.in, err)
		}
	}
}

// BenchmarkConverter converts rows shaped like the bench's (agent/bench
// parallel.go): a bigint, short strings, a decimal, a datetime, JSON and a
// 48-byte binary in hex, written out as hex and (raw) as its bytes.
func BenchmarkConverter(b *testing.B) {
	var sql bytes.Buffer
	sql.WriteString("(")
	for i := 0; i < 20000; i++ {
		if i > 0 {
			sql.WriteString("),\n(")
		}
		fmt.Fprintf(&sql, `%d,'acct-%d',%d.19,'2024-01-01 00:00:01','withdrawal','{\"ip\": \"10.1.7.1\", \"ok\": true, \"note\": \"c4ca4238a0b923820dcc509a6f75849b\"}',0xEFAA153B0F682AE5170A3184FA0DF28CA35AEA60FE097C885568BABB48EE7D1EAA8743296E3EE58C31EA5D0492D6105B`, i, i, i)
	}
	sql.WriteString(");\n")
	header, hexCols := []byte("INSERT INTO `t` VALUES"), []bool{false, false, false, false, false, false, true}
	for _, raw := range []bool{false, true} {
		b.Run(map[bool]string{false: "hex", true: "raw"}[raw], func(b *testing.B) {
			b.SetBytes(int64(sql.Len()))
			for b.Loop() {
				c := New(bufio.NewReaderSize(bytes.NewReader(sql.Bytes()), 256<<10), header, hexCols)
				c.Raw = raw
				if err := c.Run(io.Discard); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
