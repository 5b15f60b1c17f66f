"""SQLAlchemy 2 ORM mapping of the reference data."""

from __future__ import annotations

from sqlalchemy import JSON, BigInteger, Float, ForeignKey, Index, Integer, String
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column


class Base(DeclarativeBase):
    pass


class Country(Base):
    __tablename__ = "countries"

    code: Mapped[str] = mapped_column(String(2), primary_key=True)
    iso3: Mapped[str] = mapped_column(String(3))
    name: Mapped[str] = mapped_column(String(200))
    capital: Mapped[str] = mapped_column(String(200))
    continent: Mapped[str] = mapped_column(String(2))
    area_km2: Mapped[int] = mapped_column(BigInteger)
    population: Mapped[int] = mapped_column(BigInteger)
    currency_code: Mapped[str] = mapped_column(String(3))
    languages: Mapped[str] = mapped_column(String(200))


class AdminDivision(Base):
    __tablename__ = "admin_divisions"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    country_code: Mapped[str] = mapped_column(ForeignKey("countries.code"))
    code: Mapped[str] = mapped_column(String(20))
    name: Mapped[str] = mapped_column(String(200))
    level: Mapped[int] = mapped_column(Integer)
    parent_code: Mapped[str | None] = mapped_column(String(20))

    __table_args__ = (Index("ix_admin_divisions_code", "country_code", "level", "code"),)


class City(Base):
    __tablename__ = "cities"

    # GeoNames ids are assigned by GeoNames, never generated here.
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    name: Mapped[str] = mapped_column(String(200))
    country_code: Mapped[str] = mapped_column(ForeignKey("countries.code"))
    admin1_code: Mapped[str] = mapped_column(String(20))
    latitude: Mapped[float] = mapped_column(Float)
    longitude: Mapped[float] = mapped_column(Float)
    population: Mapped[int] = mapped_column(BigInteger)
    timezone: Mapped[str] = mapped_column(String(40))
    alternate_names: Mapped[list[str]] = mapped_column(JSON)


# Serves POST /cities/search: equality on the country, a population range, and the order
# of the results (largest first, ties by id).
Index("ix_cities_country_population", City.country_code, City.population.desc(), City.id)


class BenchMeta(Base):
    """What the database was prepared from, so that a stale file is rebuilt."""

    __tablename__ = "bench_meta"

    key: Mapped[str] = mapped_column(String(50), primary_key=True)
    value: Mapped[str] = mapped_column(String(200))
