-- A realistic program for recording overhead: sqlite3 building and querying
-- an indexed table in memory (allocation rate typical of a real engine, not
-- of a malloc loop).
PRAGMA cache_size = -65536;
CREATE TABLE item(id INTEGER PRIMARY KEY, name TEXT, category INTEGER, price REAL, note TEXT);
WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < 200000)
INSERT INTO item(name, category, price, note)
  SELECT hex(randomblob(6)), abs(random()) % 500, (abs(random()) % 100000) / 100.0,
         substr('lorem ipsum dolor sit amet consectetur adipiscing elit sed do', 1 + abs(random()) % 30)
  FROM n;
CREATE INDEX item_name ON item(name);
CREATE INDEX item_category ON item(category, price);
SELECT category, count(*), round(avg(price), 2) FROM item GROUP BY category ORDER BY 2 DESC LIMIT 3;
SELECT count(*) FROM item WHERE name LIKE 'A%';
SELECT count(DISTINCT note) FROM item;
UPDATE item SET price = price * 1.1 WHERE category < 100;
DELETE FROM item WHERE category % 7 = 0;
SELECT count(*), round(sum(price)) > 0 FROM item;
