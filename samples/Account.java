package bank;

import java.util.ArrayList;
import java.util.List;

/** A bank account with a transaction log. */
public class Account {
    private long balance;
    private final List<Long> log = new ArrayList<>();

    public Account(long opening) {
        this.balance = opening;
    }

    /** Deposits an amount in cents. */
    public void deposit(long cents) {
        balance += cents;
        log.add(cents);
    }

    public void deposit(int euros, int cents) {
        deposit(euros * 100L + cents);
    }

    @Override
    public String toString() {
        return "Account(" + balance + ")";
    }
}
