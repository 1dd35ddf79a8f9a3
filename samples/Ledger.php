<?php

namespace Books;

use InvalidArgumentException;

/** Bookkeeping for one account. */
class Ledger
{
    private array $entries = [];

    public function __construct(private string $owner)
    {
    }

    // Adds an entry and returns the new balance.
    public function add(int $amount, ?string $note = null): int
    {
        if ($amount === 0) {
            throw new InvalidArgumentException("zero");
        }
        $this->entries[] = ['amount' => $amount, 'note' => $note];
        return $this->balance();
    }

    public function balance(): int
    {
        $total = 0;
        foreach ($this->entries as $e) {
            $total += $e['amount'];
        }
        return $total;
    }
}

function summary(Ledger $ledger): string
{
    return count($ledger->entries) . " entries";
}
