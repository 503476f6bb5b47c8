package loaddata

import "encoding/hex"

// LOAD DATA's escaping of a value's bytes.

// rawDigits writes the bytes hex digits stand for (checked digits; a
// byte's two digits may come in two calls: c.digits counts those before).
func (c *Converter) rawDigits(digits []byte) {
	if c.digits%2 == 1 && len(digits) > 0 {
		c.raw(c.hi<<4 | unhex(digits[0]))
		digits = digits[1:]
	}
	if n := len(digits) / 2; n > 0 {
		if cap(c.scratch) < n {
			c.scratch = make([]byte, max(n, 4<<10))
		}
		c.scratch = c.scratch[:n]
		_, _ = hex.Decode(c.scratch, digits[:2*n]) // checked by hexDigits
		c.rawBytes(c.scratch)
	}
	if len(digits)%2 == 1 {
		c.hi = unhex(digits[len(digits)-1])
	}
}

func unhex(d byte) byte {
	switch {
	case d <= '9':
		return d - '0'
	case d >= 'a':
		return d - 'a' + 10
	}
	return d - 'A' + 10
}

// loadSpecial are the bytes LOAD DATA's escaping writes as an escape.
var loadSpecial = [256]bool{'\\': true, '\t': true, '\n': true, 0: true}

// rawBytes writes bytes of a value in LOAD DATA's escaping, runs of plain
// bytes at once.
func (c *Converter) rawBytes(b []byte) {
	from := 0
	for i, x := range b {
		if loadSpecial[x] {
			c.w.Write(b[from:i])
			c.raw(x)
			from = i + 1
		}
	}
	c.w.Write(b[from:])
}

// raw writes one byte of a value in LOAD DATA's escaping.
func (c *Converter) raw(b byte) {
	switch b {
	case '\\':
		c.w.WriteString(`\\`)
	case '\t':
		c.w.WriteString(`\t`)
	case '\n':
		c.w.WriteString(`\n`)
	case 0:
		c.w.WriteString(`\0`)
	default:
		c.w.WriteByte(b)
	}
}
