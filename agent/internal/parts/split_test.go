package parts

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// A dump as MariaDB's mysqldump writes it with --skip-add-locks
// --skip-disable-keys --routines --triggers --events (tuples on lines of
// their own; a ';' and a quote inside values; a trigger after the rows).
const sampleDump = "-- MariaDB dump 10.19  Distrib 10.11.6-MariaDB, for debian-linux-gnu (x86_64)\n" +
	"--\n-- Host: 127.0.0.1    Database: shop\n" +
	"-- ------------------------------------------------------\n" +
	"-- Server version\t10.11.6-MariaDB-0+deb12u1\n\n" +
	"/*!40101 SET @OLD_CHARACTER_SET_CLIENT=@@CHARACTER_SET_CLIENT */;\n" +
	"/*!40101 SET NAMES utf8mb4 */;\n" +
	"/*!40014 SET @OLD_FOREIGN_KEY_CHECKS=@@FOREIGN_KEY_CHECKS, FOREIGN_KEY_CHECKS=0 */;\n" +
	"/*!40111 SET @OLD_SQL_NOTES=@@SQL_NOTES, SQL_NOTES=0 */;\n\n" +
	"--\n-- Table structure for table `a;b`\n--\n\n" +
	"DROP TABLE IF EXISTS `a;b`;\n" +
	"CREATE TABLE `a;b` (\n  `id` int(11) NOT NULL,\n  `v` text\n) ENGINE=InnoDB;\n\n" +
	"--\n-- Dumping data for table `a;b`\n--\n\n" +
	"INSERT INTO `a;b` VALUES\n(1,'x;y'),\n(2,'it''s; \\'q\\' \\\\');\n" +
	"INSERT INTO `a;b` VALUES\n(3,NULL),\n(4,'a\\';'),\n(5,'b');\n" +
	"/*!50003 SET @saved_cs_client      = @@character_set_client */ ;\n" +
	"DELIMITER ;;\n" +
	"/*!50003 CREATE*/ /*!50003 TRIGGER t1 AFTER INSERT ON `a;b` FOR EACH ROW\n" +
	"INSERT INTO log VALUES (NEW.id) */;;\n" +
	"DELIMITER ;\n\n" +
	"--\n-- Table structure for table `c`\n--\n\n" +
	"CREATE TABLE `c` (\n  `id` int(11) NOT NULL,\n  `v` int(11) DEFAULT NULL,\n  PRIMARY KEY (`id`),\n  KEY `c_v` (`v`),\n" +
	"  UNIQUE KEY `c_u` (`v`,`id`),\n  KEY `c_idv` (`id`,`v`) COMMENT 'x; y'\n) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;\n\n" +
	"--\n-- Table structure for table `fk`\n--\n\n" +
	"CREATE TABLE `fk` (\n  `id` int(11) NOT NULL,\n  `c` int(11) DEFAULT NULL,\n  KEY `fk_c` (`c`),\n" +
	"  CONSTRAINT `fk_1` FOREIGN KEY (`c`) REFERENCES `c` (`id`)\n) ENGINE=InnoDB;\n\n" +
	"--\n-- Dumping data for table `c`\n--\n\n" +
	"INSERT INTO `c` VALUES (1),(2);\n" +
	"INSERT INTO `c` VALUES (3);\n\n" +
	"--\n-- Dumping routines for database 'shop'\n--\n" +
	"/*!40101 SET CHARACTER_SET_CLIENT=@OLD_CHARACTER_SET_CLIENT */;\n\n" +
	"-- Dump completed on 2026-12-05  8:00:00\n"

type recorder struct {
	preamble string
	phases   map[string]*bytes.Buffer
	stmts    []string // data statements, "table|text"
	cur      bytes.Buffer
	curTable string
}

func (r *recorder) Preamble(p []byte) error { r.preamble = string(p); return nil }
func (r *recorder) Write(phase, table string, p []byte) error {
	if phase == PhaseData {
		r.cur.Write(p)
		r.curTable = table
		return nil
	}
	if r.phases[phase] == nil {
		r.phases[phase] = &bytes.Buffer{}
	}
	r.phases[phase].Write(p)
	return nil
}
func (r *recorder) StatementEnd(table string) error {
	r.stmts = append(r.stmts, table+"|"+r.cur.String())
	r.cur.Reset()
	return nil
}

func split(t *testing.T, dump string, chunk int) *recorder {
	t.Helper()
	r := &recorder{phases: map[string]*bytes.Buffer{}}
	s := NewSplitter(r)
	for b := []byte(dump); len(b) > 0; {
		n := min(chunk, len(b))
		if _, err := s.Write(b[:n]); err != nil {
			t.Fatal(err)
		}
		b = b[n:]
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return r
}

func TestSplitterSortsADump(t *testing.T) {
	for _, chunk := range []int{1, 3, 7, 64, 1 << 20} {
		r := split(t, sampleDump, chunk)
		if !strings.HasSuffix(r.preamble, "SQL_NOTES=0 */;\n") || !strings.Contains(r.preamble, "SET NAMES utf8mb4") {
			t.Fatalf("chunk %d: preamble %q", chunk, r.preamble)
		}
		want := []string{
			"`a;b`|INSERT INTO `a;b` VALUES\n(1,'x;y'),\n(2,'it''s; \\'q\\' \\\\');\n",
			"`a;b`|INSERT INTO `a;b` VALUES\n(3,NULL),\n(4,'a\\';'),\n(5,'b');\n",
			"`c`|INSERT INTO `c` VALUES (1),(2);\n",
			"`c`|INSERT INTO `c` VALUES (3);\n",
		}
		if strings.Join(r.stmts, "#") != strings.Join(want, "#") {
			t.Fatalf("chunk %d: data statements\n%q\nwant\n%q", chunk, r.stmts, want)
		}
		schema, post := r.phases[PhaseSchema].String(), r.phases[PhasePost].String()
		for _, s := range []string{"CREATE TABLE `a;b`", "CREATE TABLE `c`"} {
			if !strings.Contains(schema, s) || strings.Contains(post, s) {
				t.Fatalf("chunk %d: %s not in the schema phase only", chunk, s)
			}
		}
		for _, s := range []string{"TRIGGER t1", "INSERT INTO log VALUES", "Dumping routines", "SET CHARACTER_SET_CLIENT=@OLD"} {
			if !strings.Contains(post, s) || strings.Contains(schema, s) {
				t.Fatalf("chunk %d: %s not in the post phase only:\nschema %q\npost %q", chunk, s, schema, post)
			}
		}
		if strings.Contains(schema+post, "VALUES (1)") {
			t.Fatalf("chunk %d: rows outside data", chunk)
		}
		// c's plain keys are built after the rows; fk keeps its own.
		wantCreate := "CREATE TABLE `c` (\n  `id` int(11) NOT NULL,\n  `v` int(11) DEFAULT NULL,\n  PRIMARY KEY (`id`),\n" +
			"  UNIQUE KEY `c_u` (`v`,`id`)\n) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;\n"
		if !strings.Contains(schema, wantCreate) || !strings.Contains(schema, "  KEY `fk_c` (`c`),\n") {
			t.Fatalf("chunk %d: schema\n%s\nwant\n%s", chunk, schema, wantCreate)
		}
		wantAlter := "ALTER TABLE `c` ADD KEY `c_v` (`v`), ADD KEY `c_idv` (`id`,`v`) COMMENT 'x; y';\n"
		if got := r.phases[PhaseIndex].String(); got != wantAlter {
			t.Fatalf("chunk %d: index phase %q, want %q", chunk, got, wantAlter)
		}
	}
}

func TestSplitterRefusesACutDump(t *testing.T) {
	for _, cut := range []string{
		sampleDump[:strings.Index(sampleDump, "(2,'it")+5], // inside a string of an INSERT
		sampleDump[:100], // inside the header
	} {
		r := &recorder{phases: map[string]*bytes.Buffer{}}
		s := NewSplitter(r)
		if _, err := s.Write([]byte(cut)); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); !errors.Is(err, ErrFormat) {
			t.Fatalf("cut after %d bytes: Close = %v, want ErrFormat", len(cut), err)
		}
	}
}
