package migrate

import (
	"database/sql"
	"testing"
)

func TestAppendMyValue(t *testing.T) {
	for _, tc := range []struct {
		kind    int
		charset string
		v       sql.RawBytes
		want    string
	}{
		{myQuoted, "", nil, "NULL"},
		{myQuoted, "utf8mb4", sql.RawBytes{}, "''"},
		{myQuoted, "utf8mb4", sql.RawBytes("O'Brien\\ \x00\n\r\x1a\t;"), `'O\'Brien\\ \0\n\r\Z` + "\t;'"},
		{myNumber, "", sql.RawBytes("-12.5e+3"), "-12.5e+3"},
		{myNumber, "", sql.RawBytes("1); DROP"), `'1); DROP'`},
		{myNumber, "", sql.RawBytes{}, "''"},
		{myHex, "", sql.RawBytes{0x00, 0xff, '\''}, "X'00ff27'"},
		{myHex, "", sql.RawBytes{}, "X''"},
		{myCharset, "latin1", sql.RawBytes{0xe9}, "_latin1 X'e9'"},
	} {
		if got := string(appendMyValue(nil, tc.kind, tc.charset, tc.v)); got != tc.want {
			t.Errorf("appendMyValue(%d, %q, %q) = %s, want %s", tc.kind, tc.charset, tc.v, got, tc.want)
		}
	}
}
