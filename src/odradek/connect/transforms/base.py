"""The transform and predicate interfaces.

A connector's ``transforms=a,b`` runs ``a`` then ``b`` on each record; each is
made from ``transforms.<alias>.type`` (a class name) and configured with the
``transforms.<alias>.*`` settings, prefix removed. ``transforms.<alias>.predicate``
names a predicate (``predicates.<p>.type`` and ``predicates.<p>.*``) and
``transforms.<alias>.negate=true`` inverts it: the transform applies only to
records the predicate matches. A transform returning None drops the record.
Kafka's ``$Key``/``$Value`` variants are written ``InsertField$Value`` as in
Kafka; the plugin lookup finds them by that name.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import ClassVar, Generic, TypeVar

from odradek.connect.config import ConfigDef
from odradek.connect.data import ConnectRecord

R = TypeVar("R", bound=ConnectRecord)


class Transformation(ABC, Generic[R]):
    CONFIG: ClassVar[ConfigDef] = ConfigDef()

    @abstractmethod
    def configure(self, props: Mapping[str, str]) -> None: ...

    @abstractmethod
    def apply(self, record: R) -> R | None: ...

    def close(self) -> None:
        pass


class Predicate(ABC, Generic[R]):
    CONFIG: ClassVar[ConfigDef] = ConfigDef()

    @abstractmethod
    def configure(self, props: Mapping[str, str]) -> None: ...

    @abstractmethod
    def test(self, record: R) -> bool: ...

    def close(self) -> None:
        pass
