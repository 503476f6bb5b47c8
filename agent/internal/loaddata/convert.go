// Package loaddata converts the INSERT statements of one table, as
// mysqldump writes them, to the rows LOAD DATA reads (a MySQL restore's
// data parts load with LOAD DATA LOCAL INFILE: agent/internal/parts). It
// imports nothing but the standard library, so fuzzing it is cheap.
package loaddata

import (
	"bufio"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
)

// Converter turns the INSERT statements of one table, as mysqldump writes
// them (after the first statement's "INSERT INTO `t` VALUES"), into the
// rows of LOAD DATA: fields separated by a tab, rows ended by a newline,
// '\' escaping (\t, \n, \0, \\; \N alone is NULL), binary columns as hex
// digits (the statement loads them through UNHEX).
//
// The values mysqldump writes: NULL, numbers (written as they are), '...'
// strings with backslash escapes (mysql_real_escape_string: \0 \' \" \n
// \r \Z \\; a tab as itself), 0x… hex (--hex-blob). Anything else (b'…',
// _binary '…', a column list, another statement) is ErrNotLoadable.
type Converter struct {
	r      *bufio.Reader
	header []byte // "INSERT INTO `t` VALUES": each further statement's start
	hex    []bool // per column: binary, written as hex digits
	w      *bufio.Writer
	rows   int64 // rows written
	buf    []byte
	// digits of the hex literal being streamed
	digits int
	// hi is the first digit of a byte of a hex literal streamed raw
	hi      byte
	scratch []byte
	// Raw writes binary columns as their bytes, escaped as text is, not
	// as hex digits. Set before Run.
	Raw bool
}

// New converts the statements read from r (the first one's header already
// read), for a table of len(hex) columns, hex[i] telling a binary column.
func New(r *bufio.Reader, header []byte, hex []bool) *Converter {
	return &Converter{r: r, header: header, hex: hex}
}

// Rows is how many rows Run wrote.
func (c *Converter) Rows() int64 { return c.rows }

// ErrNotLoadable: a value or a statement the converter does not take.
var ErrNotLoadable = errors.New("not loadable with LOAD DATA")

func notLoadable(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrNotLoadable, fmt.Sprintf(format, a...))
}

// ErrCut: the stream ended inside a statement.
var ErrCut = errors.New("the part ends inside an INSERT statement")

// Run converts every statement to w (the first one's header already
// read) and flushes it.
func (c *Converter) Run(w io.Writer) error {
	c.w = bufio.NewWriterSize(w, 256<<10)
	for {
		if err := c.statement(); err != nil {
			return err
		}
		if _, err := c.skipSpace(); err == io.EOF {
			return c.w.Flush()
		} else if err != nil {
			return err
		}
		_ = c.r.UnreadByte()
		h, err := c.r.Peek(len(c.header))
		if err != nil || string(h) != string(c.header) {
			if err != nil && err != io.EOF {
				return err
			}
			return notLoadable("a statement other than %s", c.header)
		}
		_, _ = c.r.Discard(len(h))
	}
}

// read returns the next byte; the end of the part inside a statement is
// ErrCut.
func (c *Converter) read() (byte, error) {
	b, err := c.r.ReadByte()
	if err == io.EOF {
		return 0, ErrCut
	}
	return b, err
}

// skipSpace returns the next byte that is not a space or a line end (the
// end of the part is io.EOF).
func (c *Converter) skipSpace() (byte, error) {
	for {
		b, err := c.r.ReadByte()
		if err != nil {
			return 0, err
		}
		if b != ' ' && b != '\n' && b != '\r' && b != '\t' {
			return b, nil
		}
	}
}

func (c *Converter) next() (byte, error) {
	b, err := c.skipSpace()
	if err == io.EOF {
		return 0, ErrCut
	}
	return b, err
}

// statement converts "(…),(…);" up to its ';'.
func (c *Converter) statement() error {
	for {
		b, err := c.next()
		if err != nil {
			return err
		}
		if b != '(' {
			return notLoadable("%q where a row starts", b)
		}
		if err := c.row(); err != nil {
			return err
		}
		switch b, err := c.next(); {
		case err != nil:
			return err
		case b == ';':
			return nil
		case b != ',':
			return notLoadable("%q after a row", b)
		}
	}
}

// row converts one row's values up to its ')'.
func (c *Converter) row() error {
	n := len(c.hex)
	for i := 0; ; i++ {
		if i >= n {
			return notLoadable("a row with more than %d values", n)
		}
		if i > 0 {
			c.w.WriteByte('\t')
		}
		if err := c.value(c.hex[i]); err != nil {
			return err
		}
		switch b, err := c.next(); {
		case err != nil:
			return err
		case b == ')':
			if i+1 != n {
				return notLoadable("a row with %d values, the table has %d columns", i+1, n)
			}
			c.rows++
			return c.w.WriteByte('\n')
		case b != ',':
			return notLoadable("%q after a value", b)
		}
	}
}

// value converts one value; bin: the column is loaded from hex.
func (c *Converter) value(bin bool) error {
	b, err := c.next()
	if err != nil {
		return err
	}
	switch {
	case b == '\'':
		if bin {
			return c.binString()
		}
		return c.str()
	case b == 'N':
		for _, want := range []byte("ULL") {
			if b, err := c.read(); err != nil {
				return err
			} else if b != want {
				return notLoadable("a value starting N%c", b)
			}
		}
		_, err := c.w.WriteString(`\N`)
		return err
	case b == '-' || b == '+' || b == '.' || '0' <= b && b <= '9':
		return c.number(b, bin)
	}
	return notLoadable("a value starting %q", b)
}

// tokenByte are the bytes of an unquoted value (a number, a hex literal,
// a keyword): letters, digits, '.', '+', '-'.
var tokenByte = func() (t [256]bool) {
	for b := range 256 {
		t[b] = '0' <= b && b <= '9' || 'a' <= b && b <= 'z' || 'A' <= b && b <= 'Z' || b == '.' || b == '+' || b == '-'
	}
	return t
}()

// maxToken bounds an unquoted value other than a hex literal; maxHexText
// a hex literal of a text column (a binary column's streams through).
const (
	maxToken   = 1 << 10
	maxHexText = 128 << 20
)

// token reads the rest of an unquoted value after first: into c.buf, or,
// for a hex literal ("0x…") of a binary column, straight to the output
// (its digits checked on the way). It returns whether it wrote it.
func (c *Converter) token(first byte, bin bool) (bool, error) {
	c.buf = append(c.buf[:0], first)
	streamed := false
	for {
		if _, err := c.r.Peek(1); err != nil {
			if err == io.EOF {
				return false, ErrCut
			}
			return false, err
		}
		buf, _ := c.r.Peek(c.r.Buffered())
		i := 0
		for i < len(buf) && tokenByte[buf[i]] {
			i++
		}
		c.buf = append(c.buf, buf[:i]...)
		if !streamed && len(c.buf) >= 2 && c.buf[0] == '0' && (c.buf[1] == 'x' || c.buf[1] == 'X') && bin {
			streamed = true
			c.buf = c.buf[2:]
		}
		if streamed {
			// Digits of a binary value go out as they are (Raw: as the
			// bytes they stand for), checked.
			if len(c.buf) > 0 {
				if err := c.hexDigits(c.buf); err != nil {
					return true, err
				}
				if c.Raw {
					c.rawDigits(c.buf)
				} else {
					c.w.Write(c.buf)
				}
				c.digits += len(c.buf)
				c.buf = c.buf[:0]
			}
		} else if limit := maxToken; len(c.buf) > limit {
			if c.buf[0] == '0' && (c.buf[1] == 'x' || c.buf[1] == 'X') {
				limit = maxHexText // a hex literal of a text column, decoded whole
			}
			if len(c.buf) > limit {
				return false, notLoadable("an unquoted value over %d bytes", limit)
			}
		}
		_, _ = c.r.Discard(i)
		if i < len(buf) {
			return streamed, nil
		}
	}
}

func (c *Converter) number(first byte, bin bool) error {
	c.digits = 0
	streamed, err := c.token(first, bin)
	if err != nil {
		return err
	}
	if streamed {
		if c.digits%2 != 0 {
			return notLoadable("a hex literal of %d digits", c.digits)
		}
		return nil
	}
	t := c.buf
	if len(t) >= 2 && t[0] == '0' && (t[1] == 'x' || t[1] == 'X') {
		return c.hexValue(t[2:])
	}
	if bin {
		return notLoadable("a number in a binary column")
	}
	for _, b := range t {
		if !('0' <= b && b <= '9' || b == '.' || b == 'e' || b == 'E' || b == '+' || b == '-') {
			return notLoadable("a value %q", t)
		}
	}
	_, err = c.w.Write(t)
	return err
}

func (c *Converter) hexDigits(digits []byte) error {
	for _, d := range digits {
		if !('0' <= d && d <= '9' || 'a' <= d && d <= 'f' || 'A' <= d && d <= 'F') {
			return notLoadable("a hex literal with %q", d)
		}
	}
	return nil
}

// hexValue writes a 0x… literal of a text column as the bytes its digits
// stand for.
func (c *Converter) hexValue(digits []byte) error {
	if len(digits)%2 != 0 {
		return notLoadable("a hex literal of %d digits", len(digits))
	}
	if err := c.hexDigits(digits); err != nil {
		return err
	}
	raw := make([]byte, len(digits)/2)
	if _, err := hex.Decode(raw, digits); err != nil {
		return notLoadable("a hex literal: %v", err)
	}
	c.rawBytes(raw)
	return nil
}

// special are the bytes of a string literal that are not copied as they
// are: its end, an escape, and what LOAD DATA would split on.
var special = func() (t [256]bool) {
	for _, b := range []byte("'\\\t\n\x00") {
		t[b] = true
	}
	return t
}()

// str converts a string literal (its opening quote read) for a text
// column, a buffer at a time: runs of plain bytes are copied as they are.
func (c *Converter) str() error {
	for {
		if _, err := c.r.Peek(1); err != nil {
			if err == io.EOF {
				return ErrCut
			}
			return err
		}
		buf, _ := c.r.Peek(c.r.Buffered())
		i, from := 0, 0
	scan:
		for i < len(buf) {
			b := buf[i]
			if !special[b] {
				i++
				continue
			}
			c.w.Write(buf[from:i])
			switch {
			case b == '\'' && i+1 < len(buf) && buf[i+1] == '\'':
				c.w.WriteByte('\'') // a doubled quote is one quote
				i += 2
			case b == '\'' && i+1 < len(buf):
				_, _ = c.r.Discard(i + 1) // the end of the string
				return nil
			case b == '\\' && i+1 < len(buf):
				c.escape(buf[i+1])
				i += 2
			case b == '\'' || b == '\\':
				// The last byte buffered: what follows decides.
				from = i
				break scan
			default:
				c.raw(b)
				i++
			}
			from = i
		}
		c.w.Write(buf[from:i])
		_, _ = c.r.Discard(i)
		if i == len(buf) {
			continue
		}
		// A quote or a backslash ends the buffer.
		b, _ := c.r.ReadByte()
		n, err := c.read()
		switch {
		case b == '\'' && err == ErrCut:
			return nil // the string ended with the part (the statement did not)
		case err != nil:
			return err
		case b == '\'' && n == '\'':
			c.w.WriteByte('\'')
		case b == '\'':
			return c.r.UnreadByte()
		default:
			c.escape(n)
		}
	}
}

// escape writes the SQL escape \e of a string literal in LOAD DATA's
// escaping.
func (c *Converter) escape(e byte) {
	switch e {
	case '0', 'b', 'n', 'r', 't', 'Z', '\\':
		// The same escape in LOAD DATA.
		c.w.WriteByte('\\')
		c.w.WriteByte(e)
	case '%', '_':
		// SQL keeps the backslash of \% and \_.
		c.w.WriteString(`\\`)
		c.w.WriteByte(e)
	default:
		c.raw(e) // \' \" and any other: the byte itself
	}
}

// binString converts a string literal (its opening quote read) for a
// binary column: its bytes, as hex digits.
func (c *Converter) binString() error {
	c.buf = c.buf[:0]
	for {
		b, err := c.read()
		if err != nil {
			return err
		}
		switch b {
		case '\'':
			n, err := c.r.ReadByte()
			if err == nil && n == '\'' {
				c.buf = append(c.buf, '\'')
				continue
			}
			if err == nil {
				_ = c.r.UnreadByte()
			} else if err != io.EOF {
				return err
			}
			if c.Raw {
				c.rawBytes(c.buf)
				return nil
			}
			_, err = c.w.WriteString(hex.EncodeToString(c.buf))
			return err
		case '\\':
			e, err := c.read()
			if err != nil {
				return err
			}
			switch e {
			case '0':
				c.buf = append(c.buf, 0)
			case 'b':
				c.buf = append(c.buf, '\b')
			case 'n':
				c.buf = append(c.buf, '\n')
			case 'r':
				c.buf = append(c.buf, '\r')
			case 't':
				c.buf = append(c.buf, '\t')
			case 'Z':
				c.buf = append(c.buf, 0x1a)
			case '%', '_':
				c.buf = append(c.buf, '\\', e)
			default:
				c.buf = append(c.buf, e)
			}
		default:
			c.buf = append(c.buf, b)
		}
		if len(c.buf) > 64<<20 {
			return notLoadable("a quoted binary value over 64 MiB")
		}
	}
}
