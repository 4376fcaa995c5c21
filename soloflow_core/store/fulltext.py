"""Full-text search on SQLite (FTS5) and PostgreSQL (``tsvector``), one tokenizer for both.

Text is tokenized here, in Python, the same way for what is indexed and for what is
searched; the databases only see lowercase words separated by spaces. That keeps the two
dialects in agreement and makes every language searchable the same way:

- case folded, accents removed (``Straße`` → ``strasse``, ``Müller`` → ``muller``);
- words are runs of letters and digits (``find_customer`` → ``find``, ``customer``), and
  words in the Latin alphabet are stemmed (Snowball's English stemmer: ``orders`` →
  ``order``, ``delivery`` → ``deliveri``), so a word is found in any of its forms;
- scripts written without spaces (Chinese, Japanese, Thai, ...) become overlapping
  character bigrams (``查询订单`` → ``查询 询订 订单``), so a word inside a sentence matches;
  neither FTS5's ``unicode61`` tokenizer nor PostgreSQL's ``simple`` configuration splits them;
- a short list of English function words is left out.

User text never reaches a query's syntax: :func:`search_terms` keeps only words, and
:func:`fts5_query` / :func:`tsquery` quote each one. ``"foo" OR (bar``, ``NEAR``, ``*`` or
``!`` are searched as the words they contain, never parsed as operators.

:class:`FullTextIndex` holds the dialect-specific part for one text column: the DDL (an FTS5
table ``<table>_fts`` on SQLite; a stored generated ``<column>_tsv`` column with a GIN index
on PostgreSQL), keeping the FTS5 copy in sync, and the match and rank expressions. It also
keeps, per namespace, how many indexed rows hold each term (``<table>_terms``): a query
leaves out the commonest terms (:meth:`FullTextIndex.prune`). They barely change the
ranking (their inverse document frequency is near zero) but would make every row a match
to rank; the caller still scores its candidates with every term.

Each namespace's counts also hold a change counter (the term :data:`CHANGES`, which no text
yields), raised by every write to the namespace's index. A process may keep a namespace's
index itself — :class:`~soloflow_core.store.inverted_index.InvertedIndex`: term → positions
of the rows holding it, in numpy arrays, ranked in process by the sum of BM25 inverse document
frequencies — in an :class:`~soloflow_core.store.inverted_index.IndexCache` bounded in memory,
and check, in the one statement that reads what the
index does not hold (a row's changing fields), that the counter is still the one it read the
index at (:meth:`FullTextIndex.counter_sql`): another process's writes are seen at once.
"""

from __future__ import annotations

import hashlib
import math
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import snowballstemmer
import sqlalchemy as sa

from soloflow_core.flow.files import FILE_EXTENSIONS

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection

MAX_SCAN_CHARS = 65_536
"""Longer text is searched by its first and last 32,768 characters (a task usually sits at
one end of a long context): tokenizing stays a few milliseconds whatever the size."""
MAX_QUERY_TERMS = 48
"""At most this many distinct terms per query (see :func:`search_terms`)."""

MATCH_BUDGET = 2000
"""A query keeps its rarest terms while the rows holding them add up to at most this many
(each term's count in the namespace; the rarest term is always kept): ranking a match costs
about a microsecond and a half, so a lookup stays within a few milliseconds however many rows
hold its common words."""
RARE = 50
"""Terms held by at most this many rows are always kept."""
MAX_STAT_TERM = 64
"""Longer terms are not counted (and never left out of a query)."""
CHANGES = "#changes"
"""The term of ``<table>_terms`` whose ``df`` counts the writes to a namespace's index (no
text yields ``#``): a cache of the counts is current while it is unchanged."""

STOPWORDS = frozenset(
    "a an and any are as at be been but by can could did do does for from had has have he her "
    "his how i if in into is it its me my no not of on or our please she so than that the "
    "their them then there these they this those to us was we were what when where which who "
    "will with would you your".split()
)
"""English function words left out of indexes and queries (they match nearly everything)."""

_WORD = re.compile(r"[^\W_]+")
_UNSPACED = re.compile(
    "["
    "\u0e00-\u0eff"  # Thai, Lao
    "\u1000-\u109f"  # Myanmar
    "\u1780-\u17ff"  # Khmer
    "\u3040-\u30ff"  # Hiragana, Katakana
    "\u3100-\u312f\u31a0-\u31ff"  # Bopomofo, Katakana extension
    "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"  # CJK ideographs
    "\uac00-\ud7af"  # Hangul syllables (particles attach to words)
    "\U00020000-\U0003134f"  # CJK extensions B-G
    "]+"
)
_IDENTIFIER = re.compile(r"[\w][\w.:/\-]*")


def normalize(text: str) -> str:
    """Case folded, without accents (NFKD, combining marks dropped, NFC again)."""
    if text.isascii():
        return text.lower()
    decomposed = unicodedata.normalize("NFKD", text.casefold())
    stripped = "".join(ch for ch in decomposed if not unicodedata.combining(ch))
    return unicodedata.normalize("NFC", stripped)


_STEMMER = snowballstemmer.stemmer("english")


@lru_cache(maxsize=131_072)
def stem(word: str) -> str:
    """The Snowball (English) stem of a lowercased word (``orders`` → ``order``); a word
    holding a digit or a letter outside ASCII is returned as it is."""
    if not word.isascii() or not word.isalpha():
        return word
    return str(_STEMMER.stemWord(word))


VALUE_PATTERN = re.compile(
    r"(?<![\w.+\-])[\w.+\-]+@[\w\-]+(?:\.[\w\-]+)+"  # e-mail address (from its start)
    r"|(?:https?://|www\.)\S+"  # URL
    r"|(?<![\w\-./:])#?(?:[^\W_][\w\-./:#]*?\d|\d)[\w\-./:#]*"  # a word holding a digit
    r"|(?<![\w\-./:@])[^\W_][\w\-]*(?:\.[\w\-]+)*?\."  # a file name
    rf"(?:{'|'.join(FILE_EXTENSIONS)})(?![\w\-]|\.\w)"
    r"|\b[a-z]+(?:_[a-z0-9]+)+\b",  # snake_case identifiers
    re.IGNORECASE,
)
"""Values in a text: e-mail addresses, URLs, words holding a digit, file names (a word and
one of :data:`FILE_EXTENSIONS`), snake_case identifiers. They name the things a task is
about, never what the task is."""


def remove_values(text: str) -> str:
    """``text`` with every :data:`VALUE_PATTERN` match replaced by a space."""
    return VALUE_PATTERN.sub(" ", text)


def _keep(word: str) -> bool:
    return word not in STOPWORDS and (len(word) > 1 or not word.isascii())


def words(text: str) -> list[str]:
    """The words of ``text`` before stemming, in order, repeats included: what
    :func:`tokenize` stems (for showing a term as a person wrote it)."""
    out: list[str] = []
    for word in _WORD.findall(normalize(text)):
        if word.isascii() or _UNSPACED.search(word) is None:
            if _keep(word):
                out.append(word)
            continue
        pos = 0
        for run in _UNSPACED.finditer(word):
            if run.start() > pos and _keep(word[pos : run.start()]):
                out.append(word[pos : run.start()])
            chars = run.group()
            if len(chars) == 1:
                out.append(chars)
            else:
                out.extend(chars[i : i + 2] for i in range(len(chars) - 1))
            pos = run.end()
        if pos < len(word) and _keep(word[pos:]):
            out.append(word[pos:])
    return out


def tokenize(text: str) -> list[str]:
    """Every term of ``text``, in order, repeats included (see the module docstring)."""
    return [stem(w) for w in words(text)]


@lru_cache(maxsize=65_536)
def phrase_terms(phrase: str) -> tuple[str, ...]:
    """The distinct terms of a short text (a keyword), cached."""
    return tuple(dict.fromkeys(tokenize(phrase)))


def scan_window(text: str, max_chars: int = MAX_SCAN_CHARS) -> str:
    """``text``, or its first and last ``max_chars / 2`` characters when longer."""
    if len(text) <= max_chars:
        return text
    half = max_chars // 2
    return text[:half] + "\n" + text[-half:]


def search_terms(text: str, *, max_terms: int = MAX_QUERY_TERMS) -> list[str]:
    """The terms to search for ``text``: distinct, from :func:`scan_window` of it; when there
    are more than ``max_terms``, the most frequent, ties going to the terms nearest either end
    of the text (where a task sits in a long context: a first line, or the latest message).

    Example:
        >>> search_terms('Please refund "order" OR (NEAR 42')
        ['refund', 'order', 'near', '42']
    """
    return top_terms(tokenize(scan_window(text)), max_terms=max_terms)


def top_terms(tokens: Sequence[str], *, max_terms: int = MAX_QUERY_TERMS) -> list[str]:
    """:func:`search_terms` of text already tokenized (:func:`tokenize` of its
    :func:`scan_window`)."""
    counts = Counter(tokens)
    if len(counts) <= max_terms:
        return list(counts)
    first: dict[str, int] = {}
    last: dict[str, int] = {}
    for i, term in enumerate(tokens):
        first.setdefault(term, i)
        last[term] = i
    end = len(tokens) - 1
    ranked = sorted(counts, key=lambda w: (-counts[w], min(first[w], end - last[w]), first[w]))
    return ranked[:max_terms]


def identifiers(text: str) -> set[str]:
    """Lowercased identifier-like words of ``text`` (``find_customer``, ``mcp.search``), for
    matching tool names as written."""
    return {m.lower().rstrip(".:/-") for m in _IDENTIFIER.findall(scan_window(text))}


def index_text(parts: Iterable[str]) -> str:
    """What to store for ``parts``: their terms, in order, separated by spaces."""
    return " ".join(term for part in parts for term in tokenize(part))


def namespace_token(*parts: str) -> str:
    """One indexable word standing for a namespace (``user_id``, ``agent_id``): an FTS5 query
    then finds only that namespace's rows, inside the index."""
    digest = hashlib.sha256("\x1f".join(parts).encode("utf-8", "surrogatepass")).hexdigest()
    return "ns" + digest[:24]


def fts5_quote(term: str) -> str:
    """A string FTS5 reads as one literal phrase, whatever it contains."""
    return '"' + term.replace('"', '""') + '"'


def fts5_query(terms: Sequence[str], *, column: str, namespace: str | None = None) -> str:
    """Any of ``terms`` in ``column`` (and the namespace's token in ``ns``), every term quoted."""
    body = f"{column} : (" + " OR ".join(fts5_quote(t) for t in terms) + ")"
    return body if namespace is None else f"ns : {fts5_quote(namespace)} AND {body}"


def tsquery(terms: Sequence[str]) -> str:
    """Any of ``terms``, as ``to_tsquery`` text, every term quoted."""
    return " | ".join("'" + t.replace("\\", "\\\\").replace("'", "''") + "'" for t in terms)


def prune_terms(
    terms: Sequence[str], df: Mapping[str, int], budget: int = MATCH_BUDGET
) -> list[str]:
    """``terms`` without those no row holds (``df`` has no count for them) and without the
    commonest: the rarest are kept while the rows holding them add up to at most ``budget``
    (terms held by at most :data:`RARE` rows, the rarest term, and terms too long to be
    counted are always kept). In query order.

    Example:
        >>> prune_terms(["order", "the", "zebra", "absent"], {"order": 1900, "zebra": 3, "the": 9000})
        ['order', 'zebra']
    """
    keep = {t for t in terms if len(t) > MAX_STAT_TERM}
    total = 0
    for term in sorted(
        (t for t in dict.fromkeys(terms) if df.get(t, 0) > 0 and t not in keep), key=df.__getitem__
    ):
        n = df[term]
        if n <= RARE or total + n <= budget or not total:
            keep.add(term)
            total += n
    return [t for t in dict.fromkeys(terms) if t in keep]


@dataclass(frozen=True, slots=True)
class TermCounts:
    """A namespace's counts as of its change counter ``changes``: ``rows`` indexed rows,
    ``df[term]`` of them holding ``term``."""

    changes: int
    rows: int
    df: dict[str, int]

    @staticmethod
    def of(rows: Iterable[tuple[str, int]]) -> TermCounts:
        """From a namespace's (term, df) rows of ``<table>_terms``."""
        df = {term: n for term, n in rows if n > 0}
        return TermCounts(changes=df.pop(CHANGES, 0), rows=df.pop("", 0), df=df)

    def idf(self, term: str) -> float:
        """BM25's inverse document frequency of ``term`` (0 when no row holds it)."""
        n = self.df.get(term, 0)
        return math.log(1.0 + (self.rows - n + 0.5) / (n + 0.5)) if n else 0.0


@dataclass(frozen=True, slots=True)
class FullTextMatch:
    """What a query adds for a full-text condition: join ``target`` on ``onclause`` (None on
    PostgreSQL: the vector is a column of the table), filter on ``where``, order by ``rank``
    (higher is better)."""

    target: Any
    onclause: Any
    where: sa.ColumnElement[bool]
    rank: sa.ColumnElement[float]


@dataclass(frozen=True, slots=True)
class FullTextIndex:
    """A full-text index over ``table.column``, whose integer primary key is ``key``.

    The column holds :func:`index_text` output. On SQLite an FTS5 table ``<table>_fts``
    (columns ``ns``, ``body``; its rowid is the key) holds a copy; on PostgreSQL a stored
    generated ``<column>_tsv`` column (``to_tsvector('simple', column)``) has a GIN index.
    On both, ``<table>_terms`` counts the rows holding each term per namespace. The writer
    calls :meth:`put` and :meth:`remove` in the transaction that changes the rows; the
    index covers only the rows it put.
    """

    table: str
    column: str
    key: str = "id"

    @property
    def fts_table(self) -> str:
        return f"{self.table}_fts"

    @property
    def vector_column(self) -> str:
        return f"{self.column}_tsv"

    @property
    def terms_table(self) -> str:
        return f"{self.table}_terms"

    def create_ddl(self, dialect: str) -> list[str]:
        stats = (
            f"CREATE TABLE {self.terms_table} (ns VARCHAR(64) NOT NULL, "
            f"term VARCHAR({MAX_STAT_TERM}) NOT NULL, df INTEGER NOT NULL, PRIMARY KEY (ns, term))"
        )
        if dialect == "sqlite":
            return [
                f"CREATE VIRTUAL TABLE {self.fts_table} USING fts5("
                "ns, body, tokenize = 'unicode61 remove_diacritics 0')",
                stats,
            ]
        return [
            f"ALTER TABLE {self.table} ADD COLUMN {self.vector_column} tsvector GENERATED ALWAYS "
            f"AS (to_tsvector('simple'::regconfig, coalesce({self.column}, ''))) STORED",
            f"CREATE INDEX ix_{self.table}_{self.vector_column} ON {self.table} "
            f"USING gin ({self.vector_column})",
            stats,
        ]

    def drop_ddl(self, dialect: str) -> list[str]:
        stats = f"DROP TABLE IF EXISTS {self.terms_table}"
        if dialect == "sqlite":
            return [f"DROP TABLE IF EXISTS {self.fts_table}", stats]
        return [
            f"DROP INDEX IF EXISTS ix_{self.table}_{self.vector_column}",
            f"ALTER TABLE {self.table} DROP COLUMN IF EXISTS {self.vector_column}",
            stats,
        ]

    def _count(self, conn: Connection, namespace: str, texts: Iterable[str], *, sign: int) -> None:
        """Add ``sign`` to the row count of each term of each text, and of ``""`` (rows);
        raise the namespace's :data:`CHANGES` counter."""
        counts: Counter[str] = Counter()
        for text in texts:
            counts.update(w for w in set(text.split()) if len(w) <= MAX_STAT_TERM)
            counts[""] += 1
        if counts:
            rows = [{"ns": namespace, "term": w, "df": sign * n} for w, n in counts.items()]
            rows.append({"ns": namespace, "term": CHANGES, "df": 1})
            conn.execute(
                sa.text(
                    f"INSERT INTO {self.terms_table} (ns, term, df) VALUES (:ns, :term, :df) "
                    f"ON CONFLICT (ns, term) DO UPDATE SET df = {self.terms_table}.df + excluded.df"
                ),
                rows,
            )

    def put(self, conn: Connection, key: int, text: str, *, namespace: str = "") -> None:
        """Index ``text`` under ``key`` (PostgreSQL indexes the column by itself) and count
        its terms."""
        if conn.dialect.name == "sqlite":
            conn.exec_driver_sql(
                f"INSERT OR REPLACE INTO {self.fts_table} (rowid, ns, body) VALUES (?, ?, ?)",
                (key, namespace, text),
            )
        self._count(conn, namespace, [text], sign=+1)

    def put_many(
        self, conn: Connection, rows: Sequence[tuple[int, str]], *, namespace: str = ""
    ) -> None:
        """:meth:`put` for many (key, text) rows of one namespace, in two statements."""
        if not rows:
            return
        if conn.dialect.name == "sqlite":
            conn.exec_driver_sql(
                f"INSERT OR REPLACE INTO {self.fts_table} (rowid, ns, body) VALUES (?, ?, ?)",
                [(key, namespace, text) for key, text in rows],
            )
        self._count(conn, namespace, [text for _, text in rows], sign=+1)

    def remove(self, conn: Connection, rows: Sequence[tuple[int, str, str]]) -> None:
        """Unindex ``rows`` of (key, namespace token, the text :meth:`put` indexed)."""
        if not rows:
            return
        if conn.dialect.name == "sqlite":
            marks = ", ".join("?" * len(rows))
            conn.exec_driver_sql(
                f"DELETE FROM {self.fts_table} WHERE rowid IN ({marks})",
                tuple(key for key, _, _ in rows),
            )
        by_ns: dict[str, list[str]] = {}
        for _, namespace, text in rows:
            by_ns.setdefault(namespace, []).append(text)
        for namespace, texts in by_ns.items():
            self._count(conn, namespace, texts, sign=-1)

    def rebuild(self, conn: Connection, rows: Iterable[tuple[int, str, str]]) -> int:
        """Replace the index by ``rows`` of (key, namespace token, text); returns how many."""
        batch = list(rows)
        # The change counters stay and rise (a cache must never see an old value again).
        conn.execute(sa.text(f"DELETE FROM {self.terms_table} WHERE term <> :c"), {"c": CHANGES})
        conn.execute(
            sa.text(f"UPDATE {self.terms_table} SET df = df + 1 WHERE term = :c"), {"c": CHANGES}
        )
        if conn.dialect.name == "sqlite":
            conn.exec_driver_sql(f"DELETE FROM {self.fts_table}")
            if batch:
                conn.exec_driver_sql(
                    f"INSERT INTO {self.fts_table} (rowid, ns, body) VALUES (?, ?, ?)", batch
                )
        by_ns: dict[str, list[str]] = {}
        for _, namespace, text in batch:
            by_ns.setdefault(namespace, []).append(text)
        for namespace, texts in by_ns.items():
            self._count(conn, namespace, texts, sign=+1)
        return len(batch)

    def prune(
        self,
        conn: Connection,
        terms: Sequence[str],
        *,
        namespace: str = "",
        budget: int | None = None,
    ) -> list[str]:
        """``terms`` without those no indexed row of the namespace holds, and without the
        commonest (see :func:`prune_terms`; ``budget`` defaults to :data:`MATCH_BUDGET`).
        In query order."""
        if not terms:
            return []
        counted = [t for t in terms if len(t) <= MAX_STAT_TERM]
        found: dict[str, int] = (
            dict(
                conn.execute(
                    sa.text(
                        f"SELECT term, df FROM {self.terms_table} WHERE ns = :ns AND term IN :terms"
                    ).bindparams(sa.bindparam("terms", expanding=True)),
                    {"ns": namespace, "terms": counted},
                ).all()
            )
            if counted
            else {}
        )
        return prune_terms(terms, found, MATCH_BUDGET if budget is None else budget)

    def term_counts(self, conn: Connection, namespace: str) -> TermCounts:
        """Every counted term of the namespace, read in one statement."""
        rows = conn.exec_driver_sql(
            f"SELECT term, df FROM {self.terms_table} WHERE ns = "
            + ("?" if conn.dialect.name == "sqlite" else "%(ns)s"),
            (namespace,) if conn.dialect.name == "sqlite" else {"ns": namespace},
        ).all()
        return TermCounts.of(rows)

    def counter_sql(self, mark: str) -> str:
        """A scalar subquery: the namespace's :data:`CHANGES` counter (0 before any write);
        its two parameters are the namespace and :data:`CHANGES`, in the driver's ``mark``."""
        return (
            f"(SELECT coalesce((SELECT df FROM {self.terms_table} "
            f"WHERE ns = {mark} AND term = {mark}), 0))"
        )

    def match(
        self,
        dialect: str,
        table: sa.Table,
        terms: Sequence[str],
        *,
        namespace: str = "",
        top: int = 1000,
    ) -> FullTextMatch:
        """Rows of ``table`` holding any of ``terms`` (non-empty), ranked (BM25 on SQLite,
        ``ts_rank`` on PostgreSQL); on SQLite only the ``top`` best of the namespace."""
        if dialect == "sqlite":
            # The best ``top`` by BM25 inside FTS5 first: joining every match to the table
            # before sorting would cost a row lookup per match.
            fts = sa.table(self.fts_table, sa.column("rowid"))
            whole: sa.ColumnElement[Any] = sa.literal_column(self.fts_table)
            query = fts5_query(terms, column="body", namespace=namespace or None)
            score = (-sa.func.bm25(whole, 0.0, 1.0)).label("score")
            best = (
                sa.select(fts.c.rowid.label("key"), score)
                .select_from(fts)
                .where(whole.op("MATCH")(sa.literal(query)))
                .order_by(sa.desc("score"))
                .limit(top)
                .subquery()
            )
            return FullTextMatch(
                target=best,
                onclause=best.c.key == table.c[self.key],
                where=sa.true(),
                rank=best.c.score,
            )
        vector: sa.ColumnElement[Any] = sa.literal_column(f"{table.name}.{self.vector_column}")
        ts_query = sa.func.to_tsquery(
            sa.literal_column("'simple'::regconfig"), sa.literal(tsquery(terms))
        )
        return FullTextMatch(
            target=None,
            onclause=None,
            where=vector.op("@@")(ts_query),
            rank=sa.func.ts_rank(vector, ts_query),
        )
