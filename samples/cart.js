import { formatPrice } from "./format.js";

// A shopping cart that keeps line items in insertion order.
export class Cart {
  constructor() {
    this.items = [];
  }

  add(name, price, quantity) {
    this.items.push({ name, price, quantity });
  }

  total() {
    let sum = 0;
    for (const item of this.items) {
      sum = sum + item.price * item.quantity;
    }
    return sum;
  }
}

export const describe = (cart) => {
  return cart.items.map((i) => `${i.quantity} x ${i.name} at ${formatPrice(i.price)}`).join("\n");
};

function emptyCart() {
  return new Cart();
}
