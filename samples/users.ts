import { Database } from "./db";

export interface User {
  id: number;
  name: string;
}

/** Looks users up by id, with a small cache in front of the database. */
export class UserRepository {
  private cache = new Map<number, User>();

  constructor(private db: Database) {}

  find(id: number): User | undefined;
  find(name: string): User | undefined;
  find(key: number | string): User | undefined {
    if (typeof key === "number" && this.cache.has(key)) {
      return this.cache.get(key);
    }
    return this.db.lookup(key);
  }

  clear(): void {
    this.cache.clear();
  }
}

export function displayName(user: User): string {
  return user.name + " (#" + user.id + ")";
}
