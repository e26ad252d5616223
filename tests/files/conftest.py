"""Fixture files for the data-file tools, written fresh into tmp_path by each test."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pandas as pd
import pytest


@pytest.fixture
def people() -> pd.DataFrame:
    """A small frame with ints, floats, strings, a category and missing values."""
    return pd.DataFrame(
        {
            "person_id": [1, 2, 3, 4, 5, 6],
            "name": ["Ann Lee", "Bo Chen", "Cy Diaz", "Di Evans", "Ed Fox", "Flo Gray"],
            "city": ["Oslo", "Lima", "Oslo", "Rome", "Lima", "Oslo"],
            "score": [1.5, 2.25, np.nan, 4.0, 5.5, 6.75],
            "visits": [3, 0, 7, 2, 2, 9],
        }
    )


def make_sqlite(path: Path) -> Path:
    """customers ← orders (declared FK) and a products table; 10 orders."""
    conn = sqlite3.connect(path)
    conn.executescript(
        """
        CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT NOT NULL, country TEXT);
        CREATE TABLE products (sku TEXT PRIMARY KEY, price REAL);
        CREATE TABLE orders (
            order_id INTEGER PRIMARY KEY,
            customer_id INTEGER REFERENCES customers(id),
            sku TEXT REFERENCES products,
            qty INTEGER
        );
        """
    )
    customers = [(i, f"c{i}", "NO" if i % 2 else "PE") for i in range(1, 6)]
    conn.executemany("INSERT INTO customers VALUES (?,?,?)", customers)
    conn.executemany("INSERT INTO products VALUES (?,?)", [("A1", 9.5), ("B2", 3.0)])
    conn.executemany(
        "INSERT INTO orders VALUES (?,?,?,?)", [(i, 1 + i % 5, "A1" if i % 3 else "B2", i) for i in range(1, 11)]
    )
    conn.commit()
    conn.close()
    return path


@pytest.fixture
def shop_db(tmp_path: Path) -> Path:
    return make_sqlite(tmp_path / "shop.sqlite")
