package mysql_test

import (
	"fmt"
	"strconv"
	"strings"

	"cairn.dev/agent/internal/testenv"
	"cairn.dev/agent/test/suite"
)

// my adapts a private MariaDB server to the suite.
type my struct{ *testenv.MariaDB }

func startMariaDB() (suite.DB, error) {
	// The binary log on, in ROW format, as most production servers run
	// (and as point-in-time recovery needs).
	m, err := testenv.StartMariaDBWithBinlog("cairn", suite.DBPassword)
	if err != nil {
		return nil, err
	}
	return my{m}, nil
}

func (m my) Engine() string { return "mysql" }
func (m my) Port() int      { return m.MariaDB.Port }

func (m my) AgentEnv(db string) []string {
	return []string{
		"CAIRN_ENGINE=mysql",
		"CAIRN_DB_HOST=127.0.0.1",
		"CAIRN_DB_PORT=" + strconv.Itoa(m.MariaDB.Port),
		"CAIRN_DB_NAME=" + db,
		"CAIRN_DB_USER=" + m.User,
		"CAIRN_DB_PASSWORD=" + m.Password,
	}
}

func (m my) Create(db string) error {
	_, err := m.SQL("", fmt.Sprintf("CREATE DATABASE `%s` CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci", db))
	return err
}

func (m my) Drop(db string) error {
	_, err := m.SQL("", fmt.Sprintf("DROP DATABASE IF EXISTS `%s`", db))
	return err
}

func (m my) Seed(db string) error {
	if err := m.Drop(db); err != nil {
		return err
	}
	if err := m.Create(db); err != nil {
		return err
	}
	_, err := m.SQL(db, seedSQL)
	return err
}

const seedSQL = `
SET time_zone = '+05:30';
CREATE TABLE customers (
  id         BIGINT PRIMARY KEY,
  name       VARCHAR(200) NOT NULL,
  email      VARCHAR(200) NULL,
  balance    DECIMAL(30,10) NULL,
  ratio      DOUBLE NULL,
  created_at TIMESTAMP(6) NULL,
  local_at   DATETIME(6) NULL,
  birthday   DATE NULL,
  active     BOOLEAN NULL,
  avatar     BLOB NULL,
  profile    JSON NULL,
  note       LONGTEXT NULL
) ENGINE=InnoDB;
INSERT INTO customers
SELECT seq,
  CONCAT(ELT(1 + seq % 10, 'Zoë', 'Jürgen Müller', '渡辺 直美', 'Ольга', '🙂🚀 emoji', 'O''Brien; DROP', 'tab\ttab', 'new\nline', 'back\\slash', 'a"quote'), ' #', seq),
  IF(seq % 7 = 0, NULL, CONCAT('user', seq, '@example.com')),
  IF(seq % 11 = 0, NULL, seq * 12345.6789012345 - 1000000),
  IF(seq % 13 = 0, NULL, seq / 7.0),
  IF(seq % 5 = 0, NULL, TIMESTAMP('2024-03-10 01:30:00.123456') + INTERVAL seq * 37 MINUTE),
  TIMESTAMP('2000-02-28 23:59:59.999999') + INTERVAL seq DAY + INTERVAL seq * 3 SECOND,
  DATE('1969-12-31') + INTERVAL seq DAY,
  IF(seq % 3 = 0, NULL, seq % 2 = 0),
  IF(seq % 4 = 0, NULL, CONCAT(UNHEX(MD5(seq)), UNHEX(MD5(seq + 1)), X'00FF00', X'5C27')),
  IF(seq % 8 = 0, NULL, JSON_OBJECT('i', seq, 'name', CONCAT('ñ', seq), 'nested', JSON_OBJECT('ok', seq % 2 = 0))),
  IF(seq % 6 = 0, NULL, REPEAT('ß€', seq % 40))
FROM seq_1_to_3000;

CREATE TABLE orders (
  id          INT AUTO_INCREMENT PRIMARY KEY,
  customer_id BIGINT NOT NULL,
  total       DECIMAL(12,2),
  note        TEXT,
  placed_at   TIMESTAMP NULL DEFAULT CURRENT_TIMESTAMP,
  KEY orders_customer (customer_id),
  CONSTRAINT orders_fk FOREIGN KEY (customer_id) REFERENCES customers (id)
) ENGINE=InnoDB;
INSERT INTO orders (customer_id, total, note, placed_at)
SELECT 1 + seq % 3000, (seq % 1000) * 1.25, IF(seq % 9 = 0, NULL, REPEAT('x€', seq % 50)),
  TIMESTAMP('2023-01-01 00:00:00') + INTERVAL seq HOUR
FROM seq_1_to_5000;
CREATE VIEW big_spenders AS SELECT customer_id, SUM(total) AS spent FROM orders GROUP BY customer_id;
CREATE FUNCTION add_one(x INT) RETURNS INT DETERMINISTIC RETURN x + 1;
CREATE TABLE audit (id INT AUTO_INCREMENT PRIMARY KEY, order_id INT);
CREATE TRIGGER orders_audit AFTER INSERT ON orders FOR EACH ROW INSERT INTO audit (order_id) VALUES (NEW.id);
`

func (m my) SeedBig(db string, mb int) error {
	_, err := m.SQL(db, fmt.Sprintf(`
CREATE TABLE IF NOT EXISTS blobs (id INT PRIMARY KEY, data BLOB) ENGINE=InnoDB;
INSERT INTO blobs SELECT seq, RANDOM_BYTES(1024) FROM seq_1_to_%d;`, mb*1024))
	return err
}

func (m my) Mutate(db string) error {
	_, err := m.SQL(db, `
UPDATE customers SET name = CONCAT(name, ' (changed)'), balance = balance + 1 WHERE id % 10 = 1;
DELETE FROM orders WHERE id % 17 = 0;
INSERT INTO orders (customer_id, total, note) VALUES (1, 99.99, 'after backup');`)
	return err
}

// Fingerprint: counts and MD5s over every column, NULLs marked, binary in
// hex, timestamps read in UTC.
func (m my) Fingerprint(db string) (string, error) {
	out, err := m.SQL(db, fmt.Sprintf(`
SET SESSION group_concat_max_len = 1073741824;
SET time_zone = '+00:00';
SELECT 'customers', COUNT(*), MD5(GROUP_CONCAT(CONCAT_WS('|', id, HEX(name), IFNULL(email, '\N'), IFNULL(balance, '\N'),
  IFNULL(ratio, '\N'), IFNULL(created_at, '\N'), IFNULL(local_at, '\N'), IFNULL(birthday, '\N'), IFNULL(active, '\N'),
  IFNULL(HEX(avatar), '\N'), IFNULL(profile, '\N'), IFNULL(HEX(note), '\N')) ORDER BY id SEPARATOR '\n')) FROM customers
UNION ALL
SELECT 'orders', COUNT(*), MD5(GROUP_CONCAT(CONCAT_WS('|', id, customer_id, IFNULL(total, '\N'), IFNULL(HEX(note), '\N'),
  IFNULL(placed_at, '\N')) ORDER BY id SEPARATOR '\n')) FROM orders
UNION ALL
SELECT 'audit', COUNT(*), MD5(GROUP_CONCAT(CONCAT_WS('|', id, order_id) ORDER BY id SEPARATOR '\n')) FROM audit
UNION ALL
SELECT 'orders_auto_increment', AUTO_INCREMENT, '' FROM information_schema.TABLES WHERE TABLE_SCHEMA = '%[1]s' AND TABLE_NAME = 'orders'
UNION ALL
SELECT 'big_spenders', COUNT(*), MD5(GROUP_CONCAT(CONCAT_WS('|', customer_id, spent) ORDER BY customer_id SEPARATOR '\n')) FROM big_spenders
UNION ALL
SELECT 'add_one(41)', add_one(41), ''
UNION ALL
SELECT 'triggers', COUNT(*), GROUP_CONCAT(TRIGGER_NAME) FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA = '%[1]s'
UNION ALL
SELECT 'indexes', COUNT(*), GROUP_CONCAT(DISTINCT INDEX_NAME ORDER BY INDEX_NAME) FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = '%[1]s';`, db))
	return strings.TrimSpace(out), err
}
