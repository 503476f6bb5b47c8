package loaddata

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"strings"
	"testing"
	"testing/iotest"
)

// escapes are the escapes MySQL's string literals and LOAD DATA's fields
// share (\0 \b \n \r \t \Z): the byte each stands for, plus one (0: not
// one of them). The reference decoders below are written apart from the
// converter's, so a wrong rule there is not repeated here.
var escapes = [256]byte{'0': 0 + 1, 'b': 8 + 1, 'n': '\n' + 1, 'r': '\r' + 1, 't': '\t' + 1, 'Z': 0x1a + 1}

// sqlUnquote is what MySQL makes of a string literal's content (between
// its quotes): its escapes decoded, a doubled quote one quote; false when
// the content does not make one literal (an unescaped quote, a backslash
// at the end).
func sqlUnquote(s []byte) ([]byte, bool) {
	var out []byte
	for i := 0; i < len(s); i++ {
		switch b := s[i]; {
		case b == '\'' && i+1 < len(s) && s[i+1] == '\'':
			out = append(out, '\'')
			i++
		case b == '\'':
			return nil, false
		case b == '\\' && i+1 == len(s):
			return nil, false
		case b == '\\':
			i++
			switch e := s[i]; {
			case escapes[e] != 0:
				out = append(out, escapes[e]-1)
			case e == '%' || e == '_':
				out = append(out, '\\', e)
			default:
				out = append(out, e)
			}
		default:
			out = append(out, b)
		}
	}
	return out, true
}

// loadFields is what LOAD DATA (FIELDS TERMINATED BY '\t' ESCAPED BY '\\'
// LINES TERMINATED BY '\n') makes of one line: its fields, nil for \N.
func loadFields(line []byte) [][]byte {
	var fields [][]byte
	var cur []byte
	isNull := false
	for i := 0; i < len(line); i++ {
		switch b := line[i]; {
		case b == '\t':
			if isNull {
				cur = nil
			}
			fields = append(fields, cur)
			cur, isNull = []byte{}, false
		case b == '\\' && i+1 < len(line):
			i++
			switch e := line[i]; {
			case escapes[e] != 0:
				cur = append(cur, escapes[e]-1)
			case e == 'N':
				isNull = len(cur) == 0 && (i+1 == len(line) || line[i+1] == '\t')
				if !isNull {
					cur = append(cur, 'N')
				}
			default:
				cur = append(cur, e)
			}
		default:
			cur = append(cur, b)
		}
	}
	if isNull {
		cur = nil
	}
	return append(fields, cur)
}

// FuzzConverter: any string literal MySQL reads as bytes s, and any
// binary value, come out of the converter as a row LOAD DATA reads back
// as the same bytes — at every read buffer boundary, the binary value as
// hex digits and (Raw) as its bytes.
func FuzzConverter(f *testing.F) {
	for _, s := range []string{"", "a\tb", `x\\N`, `it''s`, `\0\'\"\b\n\r\t\Z\\\%\_`, "\x00\n\r\t", `\N`, "NULL"} {
		f.Add([]byte(s), []byte{0, 9, 10, 92}, true)
	}
	header, hexCols := []byte("INSERT INTO `t` VALUES"), []bool{false, false, true}
	f.Fuzz(func(t *testing.T, lit, bin []byte, hexLit bool) {
		want, ok := sqlUnquote(lit)
		if !ok || bytes.IndexByte(lit, '\n') >= 0 {
			return // not a literal, or not one mysqldump writes on a line
		}
		binSQL := "''"
		if hexLit && len(bin) > 0 {
			binSQL = "0x" + hex.EncodeToString(bin)
		} else if len(bin) > 0 {
			binSQL = "'" + strings.ReplaceAll(strings.ReplaceAll(string(bin), `\`, `\\`), "'", `\'`) + "'"
			binSQL = strings.ReplaceAll(binSQL, "\n", `\n`)
		}
		in := "(1,'" + string(lit) + "'," + binSQL + "),(2,NULL,NULL);\n"
		for i := range 4 {
			src := bufio.NewReaderSize(strings.NewReader(in), 64)
			if i%2 == 0 {
				src = bufio.NewReaderSize(iotest.OneByteReader(strings.NewReader(in)), 64)
			}
			c := New(src, header, hexCols)
			c.Raw = i >= 2
			var out bytes.Buffer
			if err := c.Run(&out); err != nil {
				t.Fatalf("%q: %v", in, err)
			}
			lines := bytes.Split(bytes.TrimSuffix(out.Bytes(), []byte("\n")), []byte("\n"))
			if len(lines) != 2 || c.rows != 2 {
				t.Fatalf("%q: %d lines, %d rows: %q", in, len(lines), c.rows, out.Bytes())
			}
			f1 := loadFields(lines[0])
			if len(f1) != 3 || string(f1[0]) != "1" || !bytes.Equal(f1[1], want) || f1[1] == nil {
				t.Fatalf("%q: row 1 reads back as %q, want [1 %q <hex>]", in, f1, want)
			}
			got, err := hex.DecodeString(string(f1[2]))
			if c.Raw {
				got, err = f1[2], nil
			}
			if err != nil || !bytes.Equal(got, bin) {
				t.Fatalf("%q (raw %v): binary reads back as %q (%v), want %x", in, c.Raw, f1[2], err, bin)
			}
			if f2 := loadFields(lines[1]); len(f2) != 3 || f2[1] != nil || f2[2] != nil {
				t.Fatalf("%q: row 2 reads back as %q, want NULLs", in, f2)
			}
		}
	})
}
