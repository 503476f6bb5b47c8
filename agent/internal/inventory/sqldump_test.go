package inventory

import (
	"fmt"
	"maps"
	"strings"
	"testing"
)

// sampleDump is mysqldump's output shape (MySQL's one-line INSERTs and
// MariaDB 10.11's one tuple per line), with the strings that could fool a
// counter: parentheses, escaped and doubled quotes, backslash runs, a raw
// newline (NO_BACKSLASH_ESCAPES), and INSERT text outside data sections.
const sampleDump = "-- MariaDB dump 10.19  Distrib 10.11.6-MariaDB, for debian-linux-gnu (x86_64)\n" +
	"/*!40101 SET @OLD_CHARACTER_SET_CLIENT=@@CHARACTER_SET_CLIENT */;\n" +
	"/*M!999999\\- enable the sandbox mode */ \n" +
	"/*!40111 SET @OLD_SQL_NOTES=@@SQL_NOTES, SQL_NOTES=0 */;\n" +
	"\n--\n-- Table structure for table `orders`\n--\n\n" +
	"DROP TABLE IF EXISTS `orders`;\n" +
	"CREATE TABLE `orders` (\n  `id` int(11) NOT NULL,\n  `note` text DEFAULT NULL,\n  PRIMARY KEY (`id`)\n) ENGINE=InnoDB;\n" +
	"\n--\n-- Dumping data for table `orders`\n--\n\n" +
	"LOCK TABLES `orders` WRITE;\n" +
	"/*!40000 ALTER TABLE `orders` DISABLE KEYS */;\n" +
	"set autocommit=0;\n" +
	"INSERT INTO `orders` VALUES (1,'a),(b'),(2,'it\\'s'),(3,'back\\\\'),(4,'x''y(('),(5,NULL),(6,0x28292C);\n" +
	"INSERT INTO `orders` VALUES (7,'two\nlines ),( here'),(8,'\\\\\\''),(9,'');\n" +
	"INSERT INTO `orders` VALUES\n(10,'a;b'),\n(11,'x\\\\'),\n(12,'(;)');\n" +
	"/*!40000 ALTER TABLE `orders` ENABLE KEYS */;\n" +
	"UNLOCK TABLES;\n" +
	"commit;\n" +
	"\n--\n-- Dumping data for table `empty``one`\n--\n\n" +
	"LOCK TABLES `empty``one` WRITE;\n" +
	"/*!40000 ALTER TABLE `empty``one` DISABLE KEYS */;\n" +
	"/*!40000 ALTER TABLE `empty``one` ENABLE KEYS */;\n" +
	"UNLOCK TABLES;\n" +
	"\n--\n-- Dumping data for table `odd`\n--\n\n" +
	"LOCK TABLES `odd` WRITE;\n" +
	"INSERT INTO `odd` VALUES (1);\n" +
	"something the counter does not know;\n" +
	"UNLOCK TABLES;\n" +
	"\n--\n-- Dumping data for table `stray`\n--\n\n" +
	"INSERT INTO `orders` VALUES (1);\n" +
	"UNLOCK TABLES;\n" +
	"DELIMITER ;;\n" +
	"/*!50003 CREATE*/ /*!50003 TRIGGER `t` AFTER INSERT ON `orders` FOR EACH ROW\n" +
	"INSERT INTO `orders` VALUES (NEW.id) */;;\n" +
	"DELIMITER ;\n" +
	"-- Dump completed on 2026-12-03 21:00:00\n"

var sampleWant = map[string]int64{"orders": 12, "empty`one": 0}

func TestSQLDumpCounterSample(t *testing.T) {
	// Every split of the stream into writes gives the same counts.
	for step := 1; step <= len(sampleDump); step++ {
		c := NewSQLDumpCounter()
		for p := sampleDump; len(p) > 0; {
			n := min(step, len(p))
			if w, err := c.Write([]byte(p[:n])); w != n || err != nil {
				t.Fatalf("Write = %d, %v", w, err)
			}
			p = p[n:]
		}
		c.CloseWithError(nil)
		got, err := c.Result()
		if err != nil || !maps.Equal(got, sampleWant) {
			t.Fatalf("step %d: %v, %v; want %v", step, got, err, sampleWant)
		}
	}
}

func TestSQLDumpCounterLongLines(t *testing.T) {
	// INSERT lines far longer than the kept head, with a string that
	// spans writes and ends in a backslash run.
	var b strings.Builder
	b.WriteString("-- Dumping data for table `big`\nLOCK TABLES `big` WRITE;\n")
	const rows = 5000
	for stmt := 0; stmt < 3; stmt++ {
		b.WriteString("INSERT INTO `big` VALUES ")
		for i := 0; i < rows; i++ {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString("(1,'" + strings.Repeat("\\\\", i%5) + strings.Repeat("(x);,", i%7) + "\\'')")
		}
		b.WriteString(";\n")
	}
	b.WriteString("UNLOCK TABLES;\n")
	in := b.String()
	for _, step := range []int{1, 7, 1023, 1024, 1025, 64 << 10, len(in)} {
		c := NewSQLDumpCounter()
		for p := in; len(p) > 0; {
			n := min(step, len(p))
			c.Write([]byte(p[:n]))
			p = p[n:]
		}
		c.CloseWithError(nil)
		got, err := c.Result()
		if err != nil || got["big"] != 3*rows || len(got) != 1 {
			t.Fatalf("step %d: %v, %v", step, got, err)
		}
	}
}

func TestSQLDumpCounterIncomplete(t *testing.T) {
	c := NewSQLDumpCounter()
	c.Write([]byte("-- Dumping data for table `t`\nINSERT INTO `t` VALUES (1,'abc"))
	c.CloseWithError(nil)
	if _, err := c.Result(); err == nil {
		t.Fatal("a dump that ends inside an INSERT gave counts")
	}
}

// FuzzSQLDumpCounter: whatever the bytes, Write consumes them, counts are
// never negative, and how the stream is split into writes never changes
// the result.
func FuzzSQLDumpCounter(f *testing.F) {
	f.Add([]byte(sampleDump), 1)
	f.Add([]byte(sampleDump), 333)
	f.Add([]byte("-- Dumping data for table `a`\nINSERT INTO `a` VALUES (1,'\\\\''),(2);\n"), 5)
	f.Add([]byte("-- Dumping data for table `b`\nLOCK TABLES `b` WRITE;\nINSERT INTO `b` VALUES\n(1,';'),\n(2,'\\'(\n');\nUNLOCK TABLES;\n"), 9)
	f.Fuzz(func(t *testing.T, in []byte, step int) {
		step = 1 + abs(step)%4096
		whole := NewSQLDumpCounter()
		whole.Write(in)
		whole.CloseWithError(nil)
		want, werr := whole.Result()
		c := NewSQLDumpCounter()
		for p := in; len(p) > 0; {
			n := min(step, len(p))
			if w, err := c.Write(p[:n]); w != n || err != nil {
				t.Fatalf("Write = %d, %v", w, err)
			}
			p = p[n:]
		}
		c.CloseWithError(nil)
		got, err := c.Result()
		if (err == nil) != (werr == nil) || !maps.Equal(got, want) {
			t.Fatalf("step %d: %v, %v; in one write: %v, %v", step, got, err, want, werr)
		}
		for k, n := range got {
			if n < 0 {
				t.Fatalf("%s: %d rows", k, n)
			}
		}
	})
}

// benchDump is a data section of the agent bench's MariaDB table shape
// (one tuple per line, as MariaDB 10.11 writes it): numbers, short
// strings, a datetime, a JSON document with escaped quotes, hex binary.
func benchDump(rows int) []byte {
	var b strings.Builder
	b.WriteString("-- Dumping data for table `events`\n--\n\nLOCK TABLES `events` WRITE;\n")
	kinds := []string{"deposit", "withdrawal", "transfer", "fee", "refund"}
	for i := 1; i <= rows; i++ {
		if i%10000 == 1 {
			if i > 1 {
				b.WriteString(";\n")
			}
			b.WriteString("INSERT INTO `events` VALUES ")
		} else {
			b.WriteString(",\n")
		}
		fmt.Fprintf(&b, "(%d,'acct-%d',%d.%02d,'2024-01-01 00:00:00','%s','{\\\"ip\\\": \\\"10.%d.%d.1\\\", \\\"ok\\\": true, \\\"note\\\": \\\"c4ca4238a0b923820dcc509a6f75849b\\\"}',0x%096x)",
			i, i%50000, i%10000, i%100, kinds[i%5], i%256, i*7%256, i)
	}
	b.WriteString(";\nUNLOCK TABLES;\n")
	return []byte(b.String())
}

// BenchmarkSQLDumpCounter is the counter's throughput on the bench's rows
// in the agent's write sizes (engine.run reads the dump's pipe 256 KiB at
// a time).
func BenchmarkSQLDumpCounter(b *testing.B) {
	dump := benchDump(100_000)
	b.SetBytes(int64(len(dump)))
	for b.Loop() {
		c := NewSQLDumpCounter()
		for p := dump; len(p) > 0; {
			n := min(len(p), 256<<10)
			c.Write(p[:n])
			p = p[n:]
		}
		got, err := c.Result()
		if err != nil || got["events"] != 100_000 {
			b.Fatalf("got %v, %v", got, err)
		}
	}
}

// A dump without LOCK TABLES (--skip-add-locks, a multi-part backup's):
// the table's triggers or the next table's DDL end its data section.
func TestSQLDumpCounterUnlocked(t *testing.T) {
	dump := "--\n-- Dumping data for table `a`\n--\n\nINSERT INTO `a` VALUES (1),\n(2);\n" +
		"/*!50003 SET @saved_cs_client      = @@character_set_client */ ;\nDELIMITER ;;\n" +
		"/*!50003 CREATE*/ /*!50003 TRIGGER t AFTER INSERT ON `a` FOR EACH ROW INSERT INTO b VALUES (1) */;;\nDELIMITER ;\n" +
		"--\n-- Table structure for table `c`\n--\n\nDROP TABLE IF EXISTS `c`;\nCREATE TABLE `c` (x int);\n" +
		"--\n-- Dumping data for table `c`\n--\n\nINSERT INTO `c` VALUES (1),(2),(3);\n\n--\n-- Dumping routines for database 'd'\n--\n"
	for _, unlocked := range []bool{false, true} {
		c := NewSQLDumpCounter()
		c.Unlocked = unlocked
		c.Write([]byte(dump))
		c.CloseWithError(nil)
		got, err := c.Result()
		if err != nil {
			t.Fatal(err)
		}
		if unlocked && (got["a"] != 2 || got["c"] != 3) {
			t.Errorf("unlocked: %v, want a=2 c=3", got)
		}
		if _, ok := got["a"]; !unlocked && ok {
			t.Errorf("locked reading: %v, want a left out (its section has lines it does not know)", got)
		}
	}
}
