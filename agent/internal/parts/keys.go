package parts

import (
	"bytes"
)

// Deferred secondary indexes.
//
// InnoDB inserts every row into every index of its table; once an index is
// larger than the buffer pool each insert is a random read. Built after the
// rows (ALTER TABLE … ADD KEY), an index is sorted and written once, and the
// tables' index builds run at once on several connections. So the splitter
// takes the plain secondary indexes ("  KEY `…` (…)" lines, not PRIMARY,
// UNIQUE, FULLTEXT or SPATIAL keys) out of each CREATE TABLE and gives them
// to the sink as one "index" statement per table (PhaseIndex), which the
// restore runs once every data part of the table is in (poolAfter) and
// before the post part. A table with
// a FOREIGN KEY keeps its keys inline (InnoDB needs an index for each
// constraint when it is created), and so does a statement the splitter
// does not read line by line (a line longer than its head).

// maxCreate bounds a CREATE TABLE statement held to take its keys out;
// a longer one passes unchanged.
const maxCreate = 1 << 20

// deferKeys rewrites a complete CREATE TABLE statement (its lines, each
// with its newline): the statement without its plain secondary keys, and
// the ALTER TABLE adding them ("" when there is nothing to defer).
func deferKeys(stmt []byte) (create []byte, alter []byte) {
	lines := bytes.SplitAfter(stmt, []byte("\n"))
	if len(lines) > 0 && len(lines[len(lines)-1]) == 0 {
		lines = lines[:len(lines)-1]
	}
	head := bytes.TrimSuffix(lines[0], []byte("\n"))
	name, ok := bytes.CutPrefix(head, []byte("CREATE TABLE "))
	if !ok || !bytes.HasSuffix(name, []byte(" (")) {
		return stmt, nil
	}
	name = bytes.TrimSuffix(name, []byte(" ("))
	end := -1
	for i := 1; i < len(lines); i++ {
		if bytes.HasPrefix(lines[i], []byte(")")) {
			end = i
			break
		}
		if bytes.Contains(lines[i], []byte("FOREIGN KEY")) {
			return stmt, nil
		}
	}
	if end < 2 {
		return stmt, nil
	}
	var kept, keys [][]byte
	for _, l := range lines[1:end] {
		def := bytes.TrimSuffix(bytes.TrimSuffix(l, []byte("\n")), []byte(","))
		if bytes.HasPrefix(def, []byte("  KEY `")) {
			keys = append(keys, bytes.TrimSpace(def))
		} else {
			kept = append(kept, def)
		}
	}
	if len(keys) == 0 || len(kept) == 0 {
		return stmt, nil
	}
	var c bytes.Buffer
	c.Write(lines[0])
	c.Write(bytes.Join(kept, []byte(",\n")))
	c.WriteByte('\n')
	for _, l := range lines[end:] {
		c.Write(l)
	}
	var a bytes.Buffer
	a.WriteString("ALTER TABLE ")
	a.Write(name)
	for i, k := range keys {
		if i > 0 {
			a.WriteByte(',')
		}
		a.WriteString(" ADD ")
		a.Write(k)
	}
	a.WriteString(";\n")
	return c.Bytes(), a.Bytes()
}

// createStart reports whether a schema line starts a CREATE TABLE.
func createStart(line []byte) bool { return bytes.HasPrefix(line, []byte("CREATE TABLE `")) }

// createEnd reports whether a line ends the statement (its ';').
func createEnd(line []byte) bool {
	return bytes.HasSuffix(bytes.TrimRight(line, "\n"), []byte(";"))
}

// tableOf returns the table a CREATE TABLE statement creates, as the dump
// names it.
func tableOf(stmt []byte) string {
	l, _, _ := bytes.Cut(stmt, []byte("\n"))
	l = bytes.TrimPrefix(l, []byte("CREATE TABLE "))
	return string(bytes.TrimSuffix(l, []byte(" (")))
}
