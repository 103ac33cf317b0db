"""The transaction coordinator: pure state over ``__transaction_state``."""
